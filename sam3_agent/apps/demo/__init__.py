"""The web demo: watch the agent segment, round by round, in a browser.

* :mod:`sam3_agent.apps.demo.sessions`: runs one browser session's request on a shared agent and
  streams its rounds; stop, errors, output files. No web framework here.
* :mod:`sam3_agent.apps.demo.views`: the HTML of the rounds and the status line (escaped text,
  images inlined as data URLs, so the page fetches nothing).
* :mod:`sam3_agent.apps.demo.page`: the Gradio page (imports ``gradio``).
* :mod:`sam3_agent.apps.demo.server`: the FastAPI app that carries the page, optionally beside the
  SAM 3 service's API, and the uvicorn runner.

The demo uses the package's public API only (:class:`~sam3_agent.Sam3Agent`, its round
events and results, the render helpers). ``gradio`` is an optional extra:
``pip install "sam3-agent[demo]"``.
"""
