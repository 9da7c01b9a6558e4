"""The agent core: the loop, its steps, tools, checks, context policies and checkpoints (the
public names are exported by :mod:`sam3_agent`)."""
