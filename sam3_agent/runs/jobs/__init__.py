"""The jobs layer: what ``eval`` and ``batch`` share, knowing nothing of either.

A job is the unit an engine runs (a batch request, an evaluation sample); each kind of job
has its own record type, stored by the one store and built by its own worker factory.
:mod:`~sam3_agent.runs.jobs.ray_engine` is the only module that imports :mod:`ray`.
"""
