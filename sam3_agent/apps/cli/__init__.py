"""The ``sam3-agent`` command line: one module per command group, registered in ``main``."""
