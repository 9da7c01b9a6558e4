"""The Ray engine: jobs flow through Ray Data to a pool of agent workers (actors).

Each actor builds its own models once (``factory.build``: SAM 3 in process on its GPU, or a
client of a SAM 3 service) and runs up to ``concurrency`` sessions at once inside an async
UDF. The dataset holds one row per *image*, carrying every job of that image, so an image
is read once, on the worker, and its SAM 3 features are computed once there. Only paths and
queries travel from the driver; results (plain library records) travel back pickled and are
committed by the driver as they arrive (:func:`sam3_agent.runs.jobs.driver.run_jobs`).

Failures: a job's own failure is already a failed result (the handler's promise). An error
that must stop the run (a broken dataset file, models that cannot load) comes back as a row
and is raised on the driver as the same exception. A worker process that dies is restarted
by Ray Data and its unfinished image groups are run again; their results reach the store
once (the job id is its key). This module is the only one that imports :mod:`ray`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import J, JobHandler, JobResult, R, ResultCallback, WorkerFactory
from sam3_agent.runs.jobs.local import run_concurrently
from sam3_agent.values.errors import EngineError, Sam3AgentError, UserError

logger = logging.getLogger(__name__)

MIN_LOCAL_CPUS = 8
"""Logical CPUs of a Ray started here. Ray Data's actor pool can deadlock under
backpressure when a small machine declares its 2 real cores (seen with Ray 2.60); the
work is I/O-bound (model servers), so more logical slots than cores is right."""


def import_ray() -> Any:
    """:mod:`ray`, or a :class:`UserError` saying how to install it."""
    try:
        import ray
        import ray.data  # Ray Data comes with the ray[data] extra only
    except ImportError as e:
        raise UserError(
            'the Ray engine needs Ray Data: pip install "sam3-agent[ray]" '
            '(or pip install "ray[data]>=2.40")'
        ) from e
    return ray


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address``, or start a local one when None.

    Reuses a Ray this process already joined (a second run, a test session).

    Raises:
        UserError: Ray is not installed, or no cluster answers at ``address``.
    """
    ray = import_ray()
    if ray.is_initialized():
        return
    common: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "configure_logging": False,
    }
    try:
        if address is None:
            cpus = max(MIN_LOCAL_CPUS, os.cpu_count() or 1)
            ray.init(num_cpus=cpus, **common)
        else:
            ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"at {address}" if address else "locally"
        raise UserError(f"cannot start or join Ray {where}: {e}") from e


class RayWorker:
    """One actor of the pool: holds the models, runs image groups concurrently.

    Ray Data calls ``__call__`` with a batch of rows, each row one image's pickled jobs,
    possibly several calls at once on this actor's event loop; a semaphore keeps the
    sessions in flight at ``concurrency`` in total.
    """

    def __init__(self, factory: WorkerFactory[Any, Any], run_dir: str, concurrency: int) -> None:
        self.concurrency = concurrency
        self.handler: JobHandler[Any, Any] | None = None
        self.build_error: Sam3AgentError | None = None
        self._slots: asyncio.Semaphore | None = None
        try:
            self.handler = factory.build(Path(run_dir))
        except Sam3AgentError as e:
            # Raised here, Ray would restart the actor forever; the driver reports it instead.
            self.build_error = e

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        records: list[bytes] = []
        errors: list[bytes] = []

        def keep(result: JobResult) -> None:
            records.append(pickle.dumps(result))
            errors.append(b"")

        def fail(error: Sam3AgentError) -> dict[str, list[Any]]:
            records.append(b"")
            errors.append(pickle.dumps(error))
            return {"record": records, "error": errors}

        if self.build_error is not None or self.handler is None:
            return fail(self.build_error or EngineError("worker has no handler"))
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        for payload in batch["jobs"]:
            jobs = pickle.loads(payload)
            try:
                await run_concurrently(
                    jobs, self.handler, keep, concurrency=self.concurrency, slots=self._slots
                )
            except Sam3AgentError as e:
                return fail(e)
        return {"record": records, "error": errors}


def image_groups(jobs: Sequence[J]) -> list[list[J]]:
    """Consecutive jobs on the same image, grouped (jobs arrive ordered by image)."""
    groups: list[list[J]] = []
    for job in jobs:
        if groups and groups[-1][0].image_path == job.image_path:
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups


class RayEngine:
    """Jobs on a pool of ``workers`` Ray actors, each with its own models."""

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int = 1,
        gpus_per_worker: float = 0.0,
        concurrency: int = 8,
    ) -> None:
        if workers < 1 or concurrency < 1 or gpus_per_worker < 0:
            raise UserError("the Ray engine needs workers >= 1, concurrency >= 1, gpus >= 0")
        self.address = address
        self.workers = workers
        self.gpus_per_worker = gpus_per_worker
        self.concurrency = concurrency

    def _rows(
        self, jobs: Sequence[J], factory: WorkerFactory[J, R], run_dir: Path
    ) -> Iterator[Any]:
        ray = import_ray()
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        if not logger.isEnabledFor(logging.DEBUG):
            # Ray Data logs every execution and its settings; our progress bar says enough.
            logging.getLogger("ray.data").setLevel(logging.ERROR)
        groups = image_groups(jobs)
        items = [{"jobs": pickle.dumps(group)} for group in groups]
        # One block per image: each image is one task, streamed back the moment it is done.
        dataset = ray.data.from_items(items, override_num_blocks=len(items))
        dataset = dataset.map_batches(
            RayWorker,
            batch_size=1,
            fn_constructor_args=(factory, str(run_dir.resolve()), self.concurrency),
            compute=ray.data.ActorPoolStrategy(
                size=self.workers,
                max_tasks_in_flight_per_actor=self.concurrency,
                max_concurrent_calls_per_actor=self.concurrency,
            ),
            num_gpus=self.gpus_per_worker or None,
        )
        return iter(dataset.iter_rows())

    async def run(
        self,
        jobs: Sequence[J],
        factory: WorkerFactory[J, R],
        run_dir: Path,
        on_result: ResultCallback[R],
    ) -> None:
        connect(self.address)  # on this thread: ray.init wants the main thread
        loop = asyncio.get_running_loop()
        arrivals: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def post(kind: str, value: Any) -> None:
            try:
                loop.call_soon_threadsafe(arrivals.put_nowait, (kind, value))
            except RuntimeError:
                stop.set()  # the driver's loop is gone (interrupted): nobody is listening

        def pump() -> None:
            # A daemon thread, not the loop's executor: Ctrl-C must not wait for Ray's next row.
            try:
                for row in self._rows(jobs, factory, run_dir):
                    if stop.is_set():
                        return
                    post("row", row)
            except BaseException as e:
                post("error", e)
            else:
                post("end", None)

        threading.Thread(target=pump, name="ray-results", daemon=True).start()
        try:
            while True:
                kind, value = await arrivals.get()
                if kind == "end":
                    return
                if kind == "error":
                    if isinstance(value, Sam3AgentError):
                        raise value
                    # Ray wraps what failed (a worker's bug, a cluster gone) in its own types.
                    raise EngineError(
                        f"the Ray engine failed: {type(value).__name__}: {value}"
                    ) from value
                if value["error"]:
                    raise pickle.loads(value["error"])
                on_result(pickle.loads(value["record"]))
        finally:
            stop.set()
