"""The driver side of a run, the same on every engine: skip what is stored, commit each result
the moment it arrives (keyed by job id, so a job computed twice is counted once)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sam3_agent.runs.jobs.base import Engine, EngineOptions, J, JobResult, R, Work, WorkerFactory
from sam3_agent.runs.jobs.store import Decode, ResultStore

logger = logging.getLogger(__name__)


R_contra = TypeVar("R_contra", bound=JobResult, contravariant=True)


class ProgressListener(Protocol[R_contra]):
    """Told about the run's progress (a progress bar, a test probe)."""

    def start(self, total: int, already_done: Sequence[R_contra]) -> None: ...

    def update(self, result: R_contra) -> None:
        """Called once ``result`` is committed."""

    def notice(self, line: str, *, warning: bool = False) -> None:
        """The engine's :class:`~.base.Notify`; without it the engine logs its notices."""


@dataclass(frozen=True)
class RunOutcome:
    """``skipped`` were stored before, ``ran`` now (``failed`` of them); ``wall_s`` includes
    building the models."""

    total: int
    skipped: int
    ran: int
    failed: int
    wall_s: float = 0.0

    @property
    def per_second(self) -> float | None:
        """Jobs run per wall-clock second; None when none ran."""
        if self.ran == 0 or self.wall_s <= 0:
            return None
        return self.ran / self.wall_s


def pending_jobs(
    jobs: Sequence[J], store: ResultStore[R], *, retry_failed: bool = False
) -> list[J]:
    """The jobs not yet in ``store`` (with ``retry_failed``, nor infrastructure failures),
    ordered by image so an image's jobs run together."""
    done = store.finished_ids(include_infra_errors=not retry_failed)
    return sorted((j for j in jobs if j.id not in done), key=lambda j: (str(j.image_path), j.id))


async def run_jobs(
    jobs: Sequence[J],
    store: ResultStore[R],
    engine: Engine,
    factory: WorkerFactory[J, R],
    *,
    progress: ProgressListener[R] | None = None,
    retry_failed: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> RunOutcome:
    """Run every job not yet in ``store`` on ``engine``, committing each as it finishes."""
    started = clock()
    todo = pending_jobs(jobs, store, retry_failed=retry_failed)
    todo_ids = {j.id for j in todo}
    if progress is not None:
        wanted = {j.id for j in jobs}
        previous = [r for r in store.results() if r.id in wanted and r.id not in todo_ids]
        progress.start(len(jobs), previous)
    logger.info(
        "%d jobs: %d already stored, %d to run on the %s engine",
        len(jobs),
        len(jobs) - len(todo),
        len(todo),
        engine.name,
    )
    committed: dict[str, bool] = {}  # job id: whether it failed

    def commit(result: R) -> None:
        if result.id not in todo_ids or result.id in committed:
            # Not asked for, or answered twice (a retried task): never counted twice.
            logger.warning("ignoring an unexpected or repeated result for job %r", result.id)
            return
        store.commit(result)
        committed[result.id] = result.failed
        if progress is not None:
            progress.update(result)

    if todo:
        # A listener written before notices existed has no notice(): the engine logs them.
        notify = getattr(progress, "notice", None)
        await engine.run(Work(todo, factory, store.run_dir, notify), commit)
    return RunOutcome(
        total=len(jobs),
        skipped=len(jobs) - len(todo),
        ran=len(committed),
        failed=sum(committed.values()),
        wall_s=max(0.0, clock() - started),
    )


def run_in_directory(
    jobs: Sequence[J],
    out: Path,
    settings: Mapping[str, Any],
    decode: Decode[R],
    engine: Engine,
    factory: WorkerFactory[J, R],
    progress: ProgressListener[R] | None = None,
    retry_failed: bool = False,
    meta: Mapping[str, Any] | None = None,
) -> tuple[RunOutcome, list[R]]:
    """:func:`run_jobs` in ``out``, created with ``settings`` or resumed with the same ones:
    what this run did and every record ``out`` holds; ``meta``: facts about this invocation."""
    with ResultStore.create_or_resume(out, settings, decode) as store:
        store.set_planned(len(jobs))
        for key, value in (meta or {}).items():
            store.set_meta(key, value)
        outcome = asyncio.run(
            run_jobs(jobs, store, engine, factory, progress=progress, retry_failed=retry_failed)
        )
        return outcome, store.results()


def build_engine(options: EngineOptions) -> Engine:
    """The engine the options name, checked; Ray is imported only when asked for."""
    options.validate()
    if options.engine == "ray":
        from sam3_agent.runs.jobs.ray_engine import RayEngine

        return RayEngine(options)
    from sam3_agent.runs.jobs.local import LocalEngine

    return LocalEngine(concurrency=options.concurrency)
