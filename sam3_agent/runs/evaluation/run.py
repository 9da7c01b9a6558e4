"""``evaluate``: what ``sam3-agent eval`` does, as a library call, on images or videos.

The run directory ``out`` holds ``results.sqlite`` (every finished sample, committed at once),
``samples/<safe id>/`` per sample (the agent's files) and the report (``metrics.json``,
``report.md``; for images the IoU histogram and the worst samples' gallery). A
:class:`~sam3_agent.runs.evaluation.video.selection.VideoEvalSet` evaluates the video agent
on a video dataset, scored with J, F and J&F (:mod:`sam3_agent.runs.evaluation.video`).
Calling it again with the same settings resumes: stored samples are skipped. Different
settings are refused: mixing two would report metrics of neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, overload

from sam3_agent.runs.evaluation.catalog import is_video_dataset
from sam3_agent.runs.evaluation.coverage import POPULATION_KEY, Population
from sam3_agent.runs.evaluation.datasets import Sample, load_samples
from sam3_agent.runs.evaluation.report import ReportFiles, write_report
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.evaluation.runner import select_shard
from sam3_agent.runs.evaluation.video.report import VideoReportFiles, write_video_report
from sam3_agent.runs.evaluation.video.results import VideoSampleResult
from sam3_agent.runs.evaluation.video.selection import VideoEvalSet, VideoSelection
from sam3_agent.runs.evaluation.video.workers import VideoEvalWorkerFactory
from sam3_agent.runs.evaluation.workers import EvalWorkerFactory
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, run_in_directory
from sam3_agent.runs.jobs.engines import build_engine
from sam3_agent.runs.jobs.models import (
    ModelSource,
    VideoModelSource,
    agent_identity,
    models_identity,
    name_chat_model,
)
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel

NOT_IDENTITY = ("check_concurrency", "prompts_dir")
"""Settings that do not change any prediction, so a resumed run may change them freely."""

MODES = ("agent", "sam3-only")


@dataclass(frozen=True)
class EvalSet:
    """Which samples to evaluate, as the ``eval`` flags say.

    Attributes:
        dataset: one of :data:`~sam3_agent.runs.evaluation.datasets.DATASETS`.
        root: the dataset directory.
        split: the split, as written in the dataset files.
        images: COCO train2014 images of the refer datasets (found under ``root`` if None).
        all_texts: ReasonSeg: every text of an image, not only the first.
        limit: only the first ``limit`` samples, in dataset order.
        shard: ``(i, n)``: shard ``i`` (0-based) of ``n``, split by image.
        preset: the preset these settings came from, recorded with the run.
    """

    dataset: str
    root: Path
    split: str = "val"
    images: Path | None = None
    all_texts: bool = False
    limit: int | None = None
    shard: tuple[int, int] = (0, 1)
    preset: str | None = None

    def load(self) -> Selection:
        """The samples, limited and sharded, and the size of the split they come from.

        Raises:
            UserError: unknown dataset, or an option that does not apply to it.
            DatasetError: missing, unreadable or inconsistent files.
        """
        index, count = self.shard
        if count < 1 or not 0 <= index < count:
            raise UserError(f"`shard` i/n needs 0 <= i < n, got {index}/{count}")
        if is_video_dataset(self.dataset):
            raise UserError(f"{self.dataset} is a video dataset: evaluate it with a VideoEvalSet")
        whole = load_samples(
            self.dataset, self.root, self.split, images=self.images, all_texts=self.all_texts
        )
        samples = whole if self.limit is None else whole[: self.limit]
        return Selection(select_shard(samples, index, count), Population.of(whole))

    def identity(self, mode: str) -> dict[str, Any]:
        """What of this selection (and the mode) a run directory is made with."""
        index, count = self.shard
        return {
            "dataset": self.dataset,
            "split": self.split,
            "mode": mode,
            "all_texts": self.all_texts,
            "shard": f"{index}/{count}" if count > 1 else None,
            # Only when given: runs made before presets existed keep their identity.
            **({"preset": self.preset} if self.preset else {}),
        }


@dataclass(frozen=True)
class Selection:
    """What :meth:`EvalSet.load` found: the ``samples`` to evaluate (after ``--limit`` and
    ``--shard``), and the ``population`` of the whole split, recorded with the run so that
    a report can say how much of the split it covers."""

    samples: list[Sample]
    population: Population


@dataclass(frozen=True)
class EvalOutcome:
    """What one call of :func:`evaluate` did (``run``) and the report it wrote."""

    run: RunOutcome
    report: ReportFiles


@dataclass(frozen=True)
class VideoEvalOutcome:
    """What one call of :func:`evaluate` on a video dataset did, and the report it wrote."""

    run: RunOutcome
    report: VideoReportFiles


@overload
def evaluate(
    dataset: EvalSet,
    out: Path,
    backends: ModelSource,
    *,
    mode: str = "agent",
    config: AgentConfig | None = None,
    engine: EngineOptions | None = None,
    retry_failed: bool = False,
    progress: ProgressListener[SampleResult] | None = None,
    loaded: Selection | None = None,
    loading_bars: bool | None = None,
) -> EvalOutcome: ...


@overload
def evaluate(
    dataset: VideoEvalSet,
    out: Path,
    backends: VideoModelSource,
    *,
    mode: str = "agent",
    config: AgentConfig | None = None,
    engine: EngineOptions | None = None,
    retry_failed: bool = False,
    progress: ProgressListener[VideoSampleResult] | None = None,
    loaded: VideoSelection | None = None,
    loading_bars: bool | None = None,
    video_options: VideoOptions | None = None,
) -> VideoEvalOutcome: ...


def evaluate(
    dataset: EvalSet | VideoEvalSet,
    out: Path,
    backends: ModelSource,
    *,
    mode: str = "agent",
    config: AgentConfig | None = None,
    engine: EngineOptions | None = None,
    retry_failed: bool = False,
    progress: ProgressListener[Any] | None = None,
    loaded: Selection | VideoSelection | None = None,
    loading_bars: bool | None = None,
    video_options: VideoOptions | None = None,
) -> EvalOutcome | VideoEvalOutcome:
    """Evaluate every sample of ``dataset`` not yet stored in ``out``, then write the report.

    Args:
        dataset: which samples: an :class:`EvalSet` of images, or a
            :class:`~sam3_agent.runs.evaluation.video.selection.VideoEvalSet` of videos
            (scored with J, F and J&F; its report is a
            :class:`~sam3_agent.runs.evaluation.video.report.VideoReportFiles`).
        out: the run directory (created if needed).
        backends: what the workers build SAM 3 and the MLLM from (SAM 3's video model for
            videos). With the local engine the MLLM is built here when the settings do not
            name it; the Ray engine needs it named (nothing loads on the driver).
            ``sam3-only`` builds no MLLM.
        mode: ``agent`` (MLLM + SAM 3) or ``sam3-only`` (SAM 3 with the raw query; images
            only).
        config: the agent's settings (default :class:`AgentConfig`); ``sam3-only`` uses the
            score threshold and the pixel limit.
        engine: where the samples run (default: the local engine).
        retry_failed: evaluate again the samples stored as infrastructure failures.
        progress: told the total and what was stored before, then each committed result.
        loaded: ``dataset.load()`` when the caller already loaded it.
        loading_bars: show the progress bars of model downloads and loading where the
            models load (None: only with a ``progress`` listener).
        video_options: what the video agent shows the MLLM (default :class:`VideoOptions`);
            part of a video run's settings.

    Raises:
        UserError: bad options, or ``out`` holds a run made with other settings.
        DatasetError: broken dataset files or ground truth (what finished is kept).
        Sam3AgentError: the engine failed, or a model could not be built (what finished
            is kept; a rerun resumes).
        KeyboardInterrupt, asyncio.CancelledError: interrupted (what finished is kept).
    """
    if mode not in MODES:
        raise UserError(f"`mode` must be one of {', '.join(MODES)}, got {mode!r}")
    config = config or AgentConfig()
    engine = engine or EngineOptions()
    bars = progress is not None if loading_bars is None else loading_bars
    video = isinstance(dataset, VideoEvalSet)
    if video and mode != "agent":
        raise UserError(
            f"`mode={mode!r}` applies to image datasets; videos are evaluated with the agent"
        )
    if not video and video_options is not None:
        raise UserError("video options apply to video datasets")
    sam3_only = mode == "sam3-only"
    runner = build_engine(engine)  # checks the options before anything loads
    selection = loaded or dataset.load()
    run_settings, model_name, chat_model = _run_settings(
        dataset.identity(mode), backends, config, engine, sam3_only=sam3_only
    )
    meta = {POPULATION_KEY: selection.population.to_json()}
    if isinstance(selection, VideoSelection):
        options = video_options or VideoOptions()
        run_settings["video"] = options.describe()
        video_factory = VideoEvalWorkerFactory(
            cast("VideoModelSource", backends), config, options, str(model_name),
            chat_model=chat_model, loading_bars=bars,
        )  # fmt: skip
        outcome, _ = run_in_directory(
            selection.samples, out, run_settings, VideoSampleResult.from_json, runner,
            video_factory, progress, retry_failed, meta=meta,
        )  # fmt: skip
        return VideoEvalOutcome(run=outcome, report=write_video_report([out], out))
    factory = EvalWorkerFactory(
        backends,
        config,
        sam3_only=sam3_only,
        model=str(run_settings["sam3"] if sam3_only else model_name),
        chat_model=chat_model,  # the local engine reuses a chat model built above
        loading_bars=bars,
    )
    outcome, _ = run_in_directory(
        selection.samples, out, run_settings, SampleResult.from_json, runner, factory,
        progress, retry_failed, meta=meta,
    )  # fmt: skip
    return EvalOutcome(run=outcome, report=write_report([out], out))


def _run_settings(
    selection: dict[str, Any],
    backends: ModelSource,
    config: AgentConfig,
    engine: EngineOptions,
    *,
    sam3_only: bool,
) -> tuple[dict[str, Any], str | None, ChatModel | None]:
    """The settings a run directory is made with (the ``selection``'s identity, the models,
    the agent's settings), the chat model's name, and the model itself when it had to be
    built to learn the name (:func:`~sam3_agent.runs.jobs.models.name_chat_model`)."""
    model_name: str | None = None
    chat_model = None
    if sam3_only:
        settings: dict[str, Any] = {"score_threshold": config.score_threshold}
    else:
        model_name, chat_model = name_chat_model(backends, engine.engine)
        settings = agent_identity(config, leave_out=NOT_IDENTITY)
    run_settings = {
        **selection,
        **models_identity(backends, model_name, chat=not sam3_only),
        "agent": settings,
    }
    return run_settings, model_name, chat_model
