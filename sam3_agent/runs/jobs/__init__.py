"""What ``eval`` and ``batch`` share, knowing nothing of either: jobs, the results store and
the engines (:mod:`~sam3_agent.runs.jobs.ray_engine` is the only module importing :mod:`ray`)."""
