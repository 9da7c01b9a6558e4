"""The engine that :class:`~sam3_agent.runs.jobs.base.EngineOptions` names, built outside the
interface module so that the interface imports no engine and no engine imports it back."""

from __future__ import annotations

from sam3_agent.runs.jobs.base import Engine, EngineOptions


def build_engine(options: EngineOptions) -> Engine:
    """The engine the options name; Ray is imported only when asked for."""
    options.validate()
    if options.engine == "ray":
        from sam3_agent.runs.jobs.ray_engine import RayEngine

        return RayEngine(
            address=options.ray_address,
            workers=options.workers,
            gpus_per_worker=options.gpus_per_worker,
            concurrency=options.concurrency,
        )
    from sam3_agent.runs.jobs.local import LocalEngine

    return LocalEngine(concurrency=options.concurrency)
