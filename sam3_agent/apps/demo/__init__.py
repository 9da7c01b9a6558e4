"""The web demo: watch the agent segment, round by round, in a browser.

* :mod:`sam3_agent.apps.demo.sessions`: the runner every tab shares (one browser session's
  request on a shared agent, its rounds streamed; stop, errors, output files) and the image
  tab's; :mod:`sam3_agent.apps.demo.video`: the video tab's (the upload checked against the
  demo's limits, SAM 3's video model loaded on the first request, the overlay as WebM). No
  web framework in either.
* :mod:`sam3_agent.apps.demo.views`: the HTML of the rounds and the status line (escaped text,
  images inlined as data URLs, so the page fetches nothing) and the page's CSS.
* :mod:`sam3_agent.apps.demo.page`: the Gradio page, a tab per medium built from the same
  blocks (imports ``gradio``).
* :mod:`sam3_agent.apps.demo.server`: the FastAPI app that carries the page, optionally beside the
  SAM 3 service's API, and the uvicorn runner.

The demo uses the package's public API only (:class:`~sam3_agent.Sam3Agent` and
:class:`~sam3_agent.agent.video.agent.Sam3VideoAgent`, their round events and results, the
render helpers). ``gradio`` is an optional extra:
``pip install "sam3-agent[demo]"``.
"""
