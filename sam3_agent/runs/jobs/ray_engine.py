"""The Ray engine: a Ray Data row per image (all its jobs) for a pool of actors, each building its
models once; an error that must stop the run comes back as a row and is raised on the driver,
and a dead actor's image groups run again. The only module that imports :mod:`ray`."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import (
    EngineOptions,
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
from sam3_agent.values.errors import EngineError, Sam3AgentError, UserError

logger = logging.getLogger(__name__)

MIN_LOCAL_CPUS = 8
"""Logical CPUs of a Ray started here. Ray Data's actor pool can deadlock under
backpressure when a small machine declares its 2 real cores (seen with Ray 2.60); the
work is I/O-bound (model servers), so more logical slots than cores is right."""


@dataclass(frozen=True)
class RayConnection:
    """How this process meets Ray: ``description`` says which Ray, ``private`` one started for
    this run, ``notice`` a local cluster left unused; ``pick_up_token`` the machine's token."""

    init_args: dict[str, Any]
    description: str
    private: bool = False
    notice: str | None = None
    pick_up_token: bool = False


COMMON_INIT_ARGS: dict[str, Any] = {
    "include_dashboard": False,
    "logging_level": logging.WARNING,
    "configure_logging": False,
    # Workers' and raylet's output (ANSI-coloured, at any moment) would land in the
    # caller's stdout between its results; it stays in Ray's log files on each node.
    "log_to_driver": False,
}


def plan_connection(
    address: str | None,
    *,
    workers: int,
    environ: Mapping[str, str],
    cpu_count: int | None,
    recorded_cluster: str | None,
) -> RayConnection:
    """The ``ray.init`` arguments for ``address``, and what to say; None (unless ``RAY_ADDRESS``
    names a cluster) starts a private Ray, whatever cluster ``ray start`` recorded here."""
    from_env = environ.get("RAY_ADDRESS", "").strip()
    said = ""
    if address is None and from_env and from_env != "local":
        address, said = from_env, " (from RAY_ADDRESS)"
    if address is None or address == "local":
        # More logical CPUs than cores (see MIN_LOCAL_CPUS), and one per worker asked for
        # plus room for Ray Data's own tasks: --workers is never cut down here.
        cpus = max(MIN_LOCAL_CPUS, cpu_count or 1, workers + 2)
        notice = None
        if recorded_cluster:
            notice = (
                f"a Ray cluster started by `ray start` runs on this machine ({recorded_cluster}); "
                "this run starts its own: pass `ray_address='auto'` to run on that cluster"
            )
        return RayConnection(
            {"address": "local", "num_cpus": cpus, **COMMON_INIT_ARGS},
            f"starting a private local Ray for this run ({cpus} logical CPUs)",
            private=True,
            notice=notice,
        )
    token = False
    if address == "auto":
        where = f" ({recorded_cluster})" if recorded_cluster else ""
        description = f"joining the Ray cluster `ray start` runs on this machine{where}"
    elif address.startswith("ray://"):
        description = f"joining the Ray cluster at {address} through Ray Client"
    else:
        description, token = f"joining the Ray cluster at {address}", True
    return RayConnection(
        {"address": address, **COMMON_INIT_ARGS}, description + said, pick_up_token=token
    )


TOKEN_HELP = (
    "set RAY_AUTH_TOKEN to the output of `ray get-auth-token` on the cluster's head node "
    "(or RAY_AUTH_TOKEN_PATH to a copy of its ~/.ray/auth_token)"
)


def check_capacity(
    resources: Mapping[str, float], options: EngineOptions, *, private: bool
) -> str | None:
    """What to say when the cluster cannot run ``workers`` actors at once (Ray Data would
    silently run fewer); None when it can."""
    workers, gpus_per_worker = options.workers, options.gpus_per_worker
    cpus = float(resources.get("CPU", 0.0))
    fits = [(int(cpus + 1e-9), f"{cpus:g} CPUs (1 per worker)")]
    if gpus_per_worker > 0:
        gpus = float(resources.get("GPU", 0.0))
        fits.append(
            (int(gpus / gpus_per_worker + 1e-9), f"{gpus:g} GPUs ({gpus_per_worker:g} per worker)")
        )
    fit, why = min(fits, key=lambda f: f[0])
    if workers <= fit:
        return None
    if fit == 0 and private:
        raise UserError(
            f"`workers={workers}` `gpus_per_worker={gpus_per_worker:g}`: this machine's Ray has "
            f"{why.split(' (')[0]}, so no worker can start"
        )
    return (
        f"`workers={workers}`: the Ray cluster has {why}, so at most {fit} of them run at "
        "once (the others wait for room)"
    )


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
    """Join the Ray at ``address`` or start a private one, saying which to ``notify``; None
    when this process had joined one already."""
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
        where = "locally" if plan.private else f"at {plan.init_args['address']}"
        message = " ".join(str(e).split()) or type(e).__name__
        text = str(e).lower()
        if type(e).__name__ == "AuthenticationError" or any(
            words in text for words in ("unauthenticated", "authentication token")
        ):
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
    """Use this machine's Ray token, as ``address="auto"`` does: whether token authentication
    is on now; None when this machine has no token."""
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
    """No warning from Ray when it turns token authentication on: the run says which Ray."""
    quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(level)


class RayWorker:
    """One actor holding the models; Ray Data calls it with rows of one image's pickled jobs,
    ``concurrency`` sessions in flight in all."""

    def __init__(self, factory: WorkerFactory[Any, Any], run_dir: str, concurrency: int) -> None:
        self.concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        try:
            self.handler: JobHandler[Any, Any] | Sam3AgentError = factory.build(Path(run_dir))
        except Sam3AgentError as e:
            # Raised here, Ray would restart the actor forever; the driver reports it instead.
            self.handler = e

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        """A row per finished job (its pickled record), then, if one must stop the run, the
        pickled error: the driver raises it."""
        rows: list[bytes] = []

        def keep(result: JobResult) -> None:
            rows.append(pickle.dumps(result))

        try:
            if isinstance(self.handler, Sam3AgentError):
                raise self.handler
            self._slots = self._slots or asyncio.Semaphore(self.concurrency)
            for payload in batch["jobs"]:
                group = pickle.loads(payload)
                await run_concurrently(
                    group, self.handler, keep, concurrency=self.concurrency, slots=self._slots
                )
        except Sam3AgentError as e:
            rows.append(pickle.dumps(e))
        return {"item": rows}


def image_groups(jobs: Sequence[J]) -> list[list[J]]:
    """Consecutive jobs on the same image, grouped (jobs arrive ordered by image)."""
    return [list(group) for _, group in itertools.groupby(jobs, key=lambda j: j.image_path)]


class RayEngine:
    """Jobs on a pool of ``workers`` Ray actors, each with its own models."""

    name = "ray"

    def __init__(self, options: EngineOptions) -> None:
        options.validate()
        self.options = options

    def _rows(self, work: Work[J, R]) -> Iterator[Any]:
        ray, options = import_ray(), self.options
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        if not logger.isEnabledFor(logging.DEBUG):
            # Ray Data logs every execution and its settings; our progress bar says enough.
            logging.getLogger("ray.data").setLevel(logging.ERROR)
        items = [{"jobs": pickle.dumps(group)} for group in image_groups(work.jobs)]
        # One block per image: each image is one task, streamed back the moment it is done.
        dataset = ray.data.from_items(items, override_num_blocks=len(items))
        dataset = dataset.map_batches(
            RayWorker,
            batch_size=1,
            fn_constructor_args=(work.factory, str(work.run_dir.resolve()), options.concurrency),
            compute=ray.data.ActorPoolStrategy(
                size=options.workers,
                max_tasks_in_flight_per_actor=options.concurrency,
                max_concurrent_calls_per_actor=options.concurrency,
            ),
            num_gpus=options.gpus_per_worker or None,
        )
        return iter(dataset.iter_rows())

    async def run(self, work: Work[J, R], on_result: ResultCallback[R]) -> None:
        # On this thread: ray.init wants the main thread.
        notify = work.notify or log_notice
        plan = connect(self.options.ray_address, workers=self.options.workers, notify=notify)
        private = plan is not None and plan.private
        warning = check_capacity(import_ray().cluster_resources(), self.options, private=private)
        if warning:
            notify(warning, warning=True)
        loop = asyncio.get_running_loop()
        arrivals: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        end = object()

        def post(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(arrivals.put_nowait, item)
            except RuntimeError:
                stop.set()  # the driver's loop is gone (interrupted): nobody is listening

        def pump() -> None:
            # A daemon thread, not the loop's executor: Ctrl-C must not wait for Ray's next row.
            try:
                for row in self._rows(work):
                    if stop.is_set():
                        return
                    post(pickle.loads(row["item"]))
            except BaseException as e:
                post(e)
            else:
                post(end)

        threading.Thread(target=pump, name="ray-results", daemon=True).start()
        try:
            while (item := await arrivals.get()) is not end:
                if isinstance(item, Sam3AgentError):
                    raise item
                if isinstance(item, BaseException):
                    # Ray wraps what failed (a worker's bug, a cluster gone) in its own types.
                    raise EngineError(
                        f"the Ray engine failed: {type(item).__name__}: {item}"
                    ) from item
                on_result(item)
        finally:
            stop.set()
