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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import (
    J,
    JobHandler,
    JobResult,
    Notify,
    R,
    ResultCallback,
    Work,
    WorkerFactory,
)
from sam3_agent.runs.jobs.local import run_concurrently
from sam3_agent.runs.jobs.ray_plan import TOKEN_HELP, RayConnection, check_capacity, plan_connection
from sam3_agent.values.errors import EngineError, Sam3AgentError, UserError

logger = logging.getLogger(__name__)


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


def log_notice(line: str, *, warning: bool = False) -> None:
    """Where no one shows the engine's notices: the log (INFO, or WARNING for a warning)."""
    logger.log(logging.WARNING if warning else logging.INFO, "%s", line)


def connect(
    address: str | None, *, workers: int = 1, notify: Notify = log_notice
) -> RayConnection | None:
    """Join the Ray cluster at ``address``, or start a private local one when None
    (:func:`plan_connection`), saying which in one line to ``notify`` (the progress display
    of ``eval`` and ``batch``; the log by default).

    Reuses a Ray this process already joined (a second run, a test session): returns None.
    """
    ray = import_ray()
    if ray.is_initialized():
        return None
    plan = plan_connection(
        address,
        workers=workers,
        environ=os.environ,
        cpu_count=os.cpu_count(),
        recorded_cluster=_recorded_cluster(),
    )
    token = _pick_up_token() if plan.pick_up_token else None
    notify(plan.description)
    if plan.notice:
        notify(plan.notice, warning=True)
    try:
        with _auth_warnings_quiet():
            ray.init(**plan.init_args)
    except Exception as e:
        target = plan.init_args["address"]
        where = "locally" if plan.private else f"at {target}"
        message = " ".join(str(e).split()) or type(e).__name__
        if _is_auth_failure(e):
            raise UserError(
                f"cannot join Ray {where}: the cluster refused this machine's token or it "
                f"has none: {TOKEN_HELP}"
            ) from e
        hint = ""
        if plan.pick_up_token and token is None:
            hint = f" (if the cluster uses token authentication, Ray's default: {TOKEN_HELP})"
        raise UserError(f"cannot start or join Ray {where}: {message}{hint}") from e
    return plan


def _recorded_cluster() -> str | None:
    """The address ``ray start`` recorded on this machine, if any (Ray's own lookup)."""
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address() or None
    except Exception:  # a Ray without this private helper: nothing to say
        return None


def _pick_up_token() -> bool | None:
    """Use this machine's Ray token for an explicit address, as ``address="auto"`` does:
    True when token authentication is on for this process, False when off, None when this
    machine has no token."""
    try:
        from ray._private.authentication import authentication_token_setup as auth
    except ImportError:  # a Ray without token authentication
        return False
    if not auth.AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return None
    with _auth_warnings_quiet():
        return bool(auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False))


@contextmanager
def _auth_warnings_quiet() -> Iterator[None]:
    """Ray warns on stderr whenever it turns token authentication on ("for this Ray
    cluster", also when joining one); the run's own log line says which Ray it uses."""
    quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(level)


def _is_auth_failure(error: BaseException) -> bool:
    if type(error).__name__ == "AuthenticationError":
        return True
    text = str(error).lower()
    return "unauthenticated" in text or "authentication token" in text


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

    def _rows(self, work: Work[J, R]) -> Iterator[Any]:
        ray = import_ray()
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        if not logger.isEnabledFor(logging.DEBUG):
            # Ray Data logs every execution and its settings; our progress bar says enough.
            logging.getLogger("ray.data").setLevel(logging.ERROR)
        groups = image_groups(work.jobs)
        items = [{"jobs": pickle.dumps(group)} for group in groups]
        # One block per image: each image is one task, streamed back the moment it is done.
        dataset = ray.data.from_items(items, override_num_blocks=len(items))
        dataset = dataset.map_batches(
            RayWorker,
            batch_size=1,
            fn_constructor_args=(work.factory, str(work.run_dir.resolve()), self.concurrency),
            compute=ray.data.ActorPoolStrategy(
                size=self.workers,
                max_tasks_in_flight_per_actor=self.concurrency,
                max_concurrent_calls_per_actor=self.concurrency,
            ),
            num_gpus=self.gpus_per_worker or None,
        )
        return iter(dataset.iter_rows())

    async def run(self, work: Work[J, R], on_result: ResultCallback[R]) -> None:
        # On this thread: ray.init wants the main thread.
        notify = work.notify or log_notice
        plan = connect(self.address, workers=self.workers, notify=notify)
        warning = check_capacity(
            import_ray().cluster_resources(),
            workers=self.workers,
            gpus_per_worker=self.gpus_per_worker,
            private=plan is not None and plan.private,
        )
        if warning:
            notify(warning, warning=True)
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
                for row in self._rows(work):
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
