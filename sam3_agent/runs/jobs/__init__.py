"""The jobs layer: what ``eval`` and ``batch`` share, knowing nothing of either.

A job is the unit an engine runs (a batch request, an evaluation sample); each kind of job
has its own record type, stored by the one store and built by its own worker factory.

* :mod:`~sam3_agent.runs.jobs.base`: the interface (jobs, records, handlers, worker
  factories, engines) and the engine options.
* :mod:`~sam3_agent.runs.jobs.engines`: :func:`~sam3_agent.runs.jobs.engines.build_engine`.
* :mod:`~sam3_agent.runs.jobs.records`: what every kind's record holds, and its JSON form.
* :mod:`~sam3_agent.runs.jobs.store`: the crash-safe results store of a run directory.
* :mod:`~sam3_agent.runs.jobs.driver`: skip stored jobs, commit each result as it arrives.
* :mod:`~sam3_agent.runs.jobs.failures`: the one failure policy (a job's failure is its record).
* :mod:`~sam3_agent.runs.jobs.embeddings`: each image's SAM 3 features computed once.
* :mod:`~sam3_agent.runs.jobs.models`: the models a run's workers build, and their names.
* :mod:`~sam3_agent.runs.jobs.local`: every job on one event loop in this process (default).
* :mod:`~sam3_agent.runs.jobs.ray_engine`: an actor pool of workers through Ray Data; the only
  module that imports :mod:`ray`.
"""
