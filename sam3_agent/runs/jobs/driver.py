"""The driver side of a run, the same for every engine: skip what is stored, commit the rest.

Each result is committed to the :class:`~sam3_agent.runs.jobs.store.ResultStore` the
moment the engine reports it, on the driver's thread. A killed driver or a lost worker
therefore loses only unfinished jobs, and the job id as the store's key means nothing is
ever counted twice when a rerun (or Ray's own retry of a lost task) computes a job again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sam3_agent.runs.jobs.base import Engine, J, JobResult, R, Work, WorkerFactory
from sam3_agent.runs.jobs.store import Decode, ResultStore

logger = logging.getLogger(__name__)


R_contra = TypeVar("R_contra", bound=JobResult, contravariant=True)


class ProgressListener(Protocol[R_contra]):
    """Told about the run's progress (a progress bar, a test probe)."""

    def start(self, total: int, already_done: Sequence[R_contra]) -> None:
        """``total`` jobs in this run, of which ``already_done`` were stored before."""
        ...

    def update(self, result: R_contra) -> None:
        """Called once ``result`` is committed."""
        ...

    def notice(self, line: str, *, warning: bool = False) -> None:
        """A line for the user about the run itself, from the engine (which Ray runs the
        jobs; a ``warning``): shown beside the progress (see :class:`~.base.Notify`). A
        listener without this method still works: the engine logs its notices instead."""
        ...


@dataclass(frozen=True)
class RunOutcome:
    """Counts of one run: ``skipped`` were stored before, ``ran`` were done now, of which
    ``failed`` failed; ``wall_s`` wall-clock seconds the run took (the workers building
    their models included)."""

    total: int
    skipped: int
    ran: int
    failed: int
    wall_s: float = 0.0

    @property
    def per_second(self) -> float | None:
        """Jobs run per wall-clock second: unlike a sum of per-job times, this counts
        concurrent jobs once. None when nothing ran."""
        if self.ran == 0 or self.wall_s <= 0:
            return None
        return self.ran / self.wall_s


def pending_jobs(
    jobs: Sequence[J], store: ResultStore[R], *, retry_failed: bool = False
) -> list[J]:
    """The jobs not yet in ``store``, ordered by image so an image's jobs run together;
    with ``retry_failed``, jobs stored as infrastructure failures count as not done."""
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
    ran = failed = 0
    committed: set[str] = set()

    def commit(result: R) -> None:
        nonlocal ran, failed
        if result.id not in todo_ids or result.id in committed:
            # Not asked for, or answered twice (a retried task): never counted twice.
            logger.warning("ignoring an unexpected or repeated result for job %r", result.id)
            return
        store.commit(result)
        committed.add(result.id)
        ran += 1
        failed += int(result.failed)
        if progress is not None:
            progress.update(result)

    if todo:
        # A listener written before notices existed has no notice(): the engine logs them.
        notify = getattr(progress, "notice", None)
        await engine.run(Work(todo, factory, store.run_dir, notify), commit)
    return RunOutcome(
        total=len(jobs),
        skipped=len(jobs) - len(todo),
        ran=ran,
        failed=failed,
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
    """:func:`run_jobs` in the run directory ``out``, created with ``settings`` or resumed
    with the same ones (``decode`` reads its records back): what this run did, and every
    record the directory now holds. Each worker builds its models from ``factory`` (the
    local engine in this process, Ray on every actor). ``meta``: facts about this invocation
    recorded in the store beside the plan (:meth:`ResultStore.set_meta`), such as the size of
    the whole split an evaluation takes its samples from.
    """
    with ResultStore.create_or_resume(out, settings, decode) as store:
        store.set_planned(len(jobs))
        for key, value in (meta or {}).items():
            store.set_meta(key, value)
        outcome = asyncio.run(
            run_jobs(jobs, store, engine, factory, progress=progress, retry_failed=retry_failed)
        )
        return outcome, store.results()
