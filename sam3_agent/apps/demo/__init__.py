"""The web demo: watch the agent segment, round by round, in a browser.

The runners (:mod:`.sessions`, :mod:`.video`) and the HTML (:mod:`.views`) use no web
framework; :mod:`.page` (Gradio) and :mod:`.server` (FastAPI) do. ``gradio`` is an optional
extra: ``pip install "sam3-agent[demo]"``.
"""
