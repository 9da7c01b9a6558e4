"""The web demo: watch the agent segment, round by round, in a browser. Only :mod:`.page` and
:mod:`.server` import a web framework; ``pip install "sam3-agent[demo]"`` brings ``gradio``."""
