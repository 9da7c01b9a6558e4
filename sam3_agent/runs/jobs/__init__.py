"""Batch engines behind one runner interface, shared by ``eval`` and ``batch``.

* :mod:`~sam3_agent.runs.jobs.base`: the interface (jobs, handlers, worker factories, engines)
  and :func:`~sam3_agent.runs.jobs.base.build_engine`.
* :mod:`~sam3_agent.runs.jobs.driver`: skip stored jobs, commit each result as it arrives.
* :mod:`~sam3_agent.runs.jobs.local`: every job on one event loop in this process (default).
* :mod:`~sam3_agent.runs.jobs.ray_engine`: an actor pool of workers through Ray Data; the only
  module that imports :mod:`ray`.
"""
