"""The interface every engine implements: a picklable :class:`WorkerFactory` builds, where the
work runs, a :class:`JobHandler` turning each job into its :class:`JobResult`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    # Types only: the CLI reads the engine flags here, and --help imports no numpy.
    from sam3_agent.values.images import RGBImage

ENGINES: tuple[str, ...] = ("local", "ray")

DEFAULT_CONCURRENCY = 8
"""Sessions in flight per worker; sized for one OpenAI-compatible endpoint (vLLM batches
this many well)."""


class Job(Protocol):
    """One unit of work: its id is unique in a run and stable across runs."""

    @property
    def id(self) -> str: ...

    @property
    def image_path(self) -> Path: ...


class JobResult(Protocol):
    """The stored record of one finished job; an infrastructure failure has ``infra_error`` and
    ``failed`` set (``retry_failed`` reruns it)."""

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def infra_error(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    def to_json(self) -> dict[str, Any]: ...


J = TypeVar("J", bound=Job)
J_contra = TypeVar("J_contra", bound=Job, contravariant=True)
R = TypeVar("R", bound=JobResult)
R_co = TypeVar("R_co", bound=JobResult, covariant=True)


class ImageSource(Protocol):
    """Hands a handler the decoded image of a job (read once however many jobs share it)."""

    async def get(
        self, path: Path, *, exif_orientation: bool = True, max_pixels: int | None = None
    ) -> RGBImage:
        """The RGB image at ``path`` (``max_pixels`` None: the package's limit), loaded as the
        first call for it asks."""


class JobHandler(Protocol[J_contra, R_co]):
    """Turns jobs into results on one worker. Must allow concurrent :meth:`run` calls."""

    async def run(self, job: J_contra, images: ImageSource) -> R_co:
        """``job``'s own failures become a failed result; a raised ``Sam3AgentError`` stops
        the run."""

    def release(self, digest: str) -> None:
        """The last job of the image with this content digest is done: free what it holds."""


class WorkerFactory(Protocol[J_contra, R_co]):
    """Builds a worker's :class:`JobHandler` (its models) where the work runs. Picklable."""

    def build(self, run_dir: Path) -> JobHandler[J_contra, R_co]: ...


@dataclass(frozen=True)
class Prebuilt(Generic[J, R]):
    """A factory for a handler already built in this process (the local engine only)."""

    handler: JobHandler[J, R]

    def build(self, run_dir: Path) -> JobHandler[J, R]:
        return self.handler


ResultCallback = Callable[[R], None]


class Notify(Protocol):
    """One line to the user about the run itself (which Ray runs it; a ``warning``)."""

    def __call__(self, line: str, *, warning: bool = False) -> None: ...


@dataclass(frozen=True)
class Work(Generic[J, R]):
    """``jobs`` ordered by image; ``notify`` None: the engine logs its notices."""

    jobs: Sequence[J]
    factory: WorkerFactory[J, R]
    run_dir: Path
    notify: Notify | None = None


class Engine(Protocol):
    """Runs jobs on workers and reports each result as it finishes."""

    @property
    def name(self) -> str: ...

    async def run(self, work: Work[J, R], on_result: ResultCallback[R]) -> None:
        """Calls ``on_result`` once per finished job, on this thread; one image's jobs run on one
        worker. An error raised by ``on_result`` stops the run."""


@dataclass(frozen=True)
class EngineOptions:
    """How a command spreads its work: ``concurrency`` per worker; ``ray_address`` None starts a
    local Ray, ``auto`` joins this machine's, ``ray://host:10001`` or ``host:6379`` a remote one."""

    engine: str = "local"
    concurrency: int = DEFAULT_CONCURRENCY
    ray_address: str | None = None
    workers: int = 1
    gpus_per_worker: float = 0.0

    def validate(self) -> None:
        if self.engine not in ENGINES:
            raise UserError(f"`engine` must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.concurrency < 1:
            raise UserError(f"`concurrency` must be >= 1, got {self.concurrency}")
        if self.workers < 1:
            raise UserError(f"`workers` must be >= 1, got {self.workers}")
        if self.gpus_per_worker < 0:
            raise UserError(f"`gpus_per_worker` must be >= 0, got {self.gpus_per_worker}")
        if self.engine == "local":
            if self.workers != 1:
                raise UserError("`workers` applies to `engine='ray'`; the local engine is 1 worker")
            if self.ray_address is not None:
                raise UserError("`ray_address` applies to `engine='ray'`")
            if self.gpus_per_worker:
                raise UserError("`gpus_per_worker` applies to `engine='ray'`")
