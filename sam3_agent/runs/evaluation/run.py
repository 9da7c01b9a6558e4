"""``evaluate``: what ``sam3-agent eval`` does, as a library call, on images or videos.

The run directory ``out`` holds ``results.sqlite`` (every finished sample, committed at once),
``samples/<safe id>/`` per sample (the agent's files) and the report (``metrics.json``,
``report.md``; for images the IoU histogram and the worst samples' gallery). A
:class:`~sam3_agent.runs.evaluation.selection.VideoEvalSet` evaluates the video agent
on a video dataset, scored with J, F and J&F (:mod:`sam3_agent.runs.evaluation.video`).
Calling it again with the same settings resumes: stored samples are skipped. Different
settings are refused: mixing two would report metrics of neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.runs.evaluation.coverage import POPULATION_KEY
from sam3_agent.runs.evaluation.handler import EvalWorkerFactory
from sam3_agent.runs.evaluation.report import report_runs
from sam3_agent.runs.evaluation.report_parts import ReportFiles
from sam3_agent.runs.evaluation.results import SampleResult, VideoSampleResult
from sam3_agent.runs.evaluation.selection import EvalSet, Loaded, VideoEvalSet
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, run_in_directory
from sam3_agent.runs.jobs.engines import build_engine
from sam3_agent.runs.jobs.models import (
    ModelSource,
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
class EvalOutcome:
    """What one call of :func:`evaluate` did (``run``) and the report it wrote."""

    run: RunOutcome
    report: ReportFiles


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
    loaded: Loaded[Any] | None = None,
    loading_bars: bool | None = None,
    video_options: VideoOptions | None = None,
) -> EvalOutcome:
    """Evaluate every sample of ``dataset`` not yet stored in ``out``, then write the report.

    Args:
        backends: what the workers build SAM 3 and the MLLM from (SAM 3's video model for
            videos). With the local engine the MLLM is built here when the settings do not
            name it; the Ray engine needs it named (nothing loads on the driver).
            ``sam3-only`` builds no MLLM.
        mode: ``sam3-only`` (SAM 3 with the raw query) is for images only.
        config: ``sam3-only`` uses its score threshold and pixel limit.
        progress: told the total and what was stored before, then each committed result.
        loaded: ``dataset.load()`` when the caller already loaded it.
        loading_bars: show the progress bars of model downloads and loading where the
            models load (None: only with a ``progress`` listener).
        video_options: part of a video run's settings.
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
    options = None
    if video:
        options = video_options or VideoOptions()
        run_settings["video"] = options.describe()
    factory = EvalWorkerFactory(
        backends,
        config,
        sam3_only=sam3_only,
        model=str(run_settings["sam3"] if sam3_only else model_name),
        chat_model=chat_model,  # the local engine reuses a chat model built above
        loading_bars=bars,
        video=options,
    )
    decode = VideoSampleResult.from_json if video else SampleResult.from_json
    outcome, _ = run_in_directory(
        selection.samples, out, run_settings, decode, runner, factory, progress, retry_failed,
        meta=meta,
    )  # fmt: skip
    return EvalOutcome(run=outcome, report=report_runs([out], out))


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
