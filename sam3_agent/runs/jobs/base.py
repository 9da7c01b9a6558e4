"""The one interface every engine (local, Ray) implements, and what flows through it.

A run is a list of jobs: the unit an engine runs, with an id unique in the run and an image.
A batch request and an evaluation sample are the two kinds of job; the engines know neither.
A :class:`WorkerFactory` builds, wherever the engine runs work (this process, a Ray actor on
another machine), a :class:`JobHandler` that turns one job and its decoded image into a
:class:`JobResult`, the record of that job's kind. The driver
(:func:`sam3_agent.runs.jobs.driver.run_jobs`) commits every result to the run's
:class:`~sam3_agent.runs.jobs.store.ResultStore` as it arrives, so ``eval`` and ``batch``
resume the same way on every engine. :func:`sam3_agent.runs.jobs.engines.build_engine` builds
the engine that :class:`EngineOptions` names.

Jobs, results and factories cross process boundaries under Ray: all must pickle as plain
library objects, and a factory must be cheap to pickle (settings, not models).
"""

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
    """The stored record of one finished job (each kind of job has its own record type).

    A job whose own infrastructure failed (an endpoint down, an unreadable image) is
    recorded with ``infra_error`` set and ``failed`` true; ``--retry-failed`` runs it again.
    """

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def infra_error(self) -> bool: ...

    @property
    def failed(self) -> bool: ...

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-safe values; the record type's ``from_json`` reads it back."""
        ...


J = TypeVar("J", bound=Job)
J_contra = TypeVar("J_contra", bound=Job, contravariant=True)
R = TypeVar("R", bound=JobResult)
R_co = TypeVar("R_co", bound=JobResult, covariant=True)


class ImageSource(Protocol):
    """Hands a handler the decoded image of a job (read once however many jobs share it)."""

    async def get(
        self, path: Path, *, exif_orientation: bool = True, max_pixels: int | None = None
    ) -> RGBImage:
        """The ``(H, W, 3)`` uint8 RGB image at ``path``, EXIF orientation applied unless
        ``exif_orientation`` is False (datasets annotated in the stored frame); refused above
        ``max_pixels`` (``None``: the package's default limit). The first call for a path
        decides how it is loaded: jobs of one image ask alike."""
        ...


class JobHandler(Protocol[J_contra, R_co]):
    """Turns jobs into results on one worker. Must allow concurrent :meth:`run` calls."""

    async def run(self, job: J_contra, images: ImageSource) -> R_co:
        """Process ``job``; its own failures (endpoint down, bad image) become a failed result.
        A raised ``Sam3AgentError`` stops the whole run (broken dataset files)."""
        ...

    def release(self, digest: str) -> None:
        """The last job of the image with this content digest is done: free what it holds."""
        ...


class WorkerFactory(Protocol[J_contra, R_co]):
    """Builds a worker's :class:`JobHandler` (its models) where the work runs. Picklable."""

    def build(self, run_dir: Path) -> JobHandler[J_contra, R_co]:
        """Load the models and return a handler writing its artifacts under ``run_dir``."""
        ...


@dataclass(frozen=True)
class Prebuilt(Generic[J, R]):
    """A factory for a handler already built in this process (the local engine only)."""

    handler: JobHandler[J, R]

    def build(self, run_dir: Path) -> JobHandler[J, R]:
        return self.handler


ResultCallback = Callable[[R], None]


class Notify(Protocol):
    """Shows the user one line about the run itself, beside its progress: which Ray runs
    it, or a ``warning`` (workers that cannot all start). Not for per-job news."""

    def __call__(self, line: str, *, warning: bool = False) -> None: ...


@dataclass(frozen=True)
class Work(Generic[J, R]):
    """What an engine is given to run: ``jobs`` (ordered by image), the ``factory`` each
    worker builds its handler with, the ``run_dir`` handlers write artifacts under, and
    where the engine's notices go (``notify``; None: the engine logs them)."""

    jobs: Sequence[J]
    factory: WorkerFactory[J, R]
    run_dir: Path
    notify: Notify | None = None


class Engine(Protocol):
    """Runs jobs on workers and reports each result as it finishes."""

    @property
    def name(self) -> str: ...

    async def run(self, work: Work[J, R], on_result: ResultCallback[R]) -> None:
        """Process every job of ``work``, calling ``on_result`` once per finished job, on
        this thread. The jobs of one image should run on one worker, so its image is read and
        its SAM 3 features computed once. An exception raised by ``on_result`` (or a
        cancellation) stops the run; results reported so far stay reported."""
        ...


@dataclass(frozen=True)
class EngineOptions:
    """How a command spreads its work.

    ``concurrency`` is per worker. ``ray_address``: None starts a local Ray, ``auto`` joins
    the one ``ray start`` runs on this machine, ``ray://host:10001`` or ``host:6379`` a remote
    one. ``gpus_per_worker`` may be fractional (0.5).
    """

    engine: str = "local"
    concurrency: int = DEFAULT_CONCURRENCY
    ray_address: str | None = None
    workers: int = 1
    gpus_per_worker: float = 0.0

    def validate(self) -> None:
        """Raises :class:`UserError` naming the setting that is wrong."""
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
