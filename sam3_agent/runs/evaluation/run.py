"""``evaluate``: ``sam3-agent eval`` as a library call, on images or videos, resumed when called
again with the same settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.backends.base import ChatModel
from sam3_agent.runs.evaluation.coverage import POPULATION_KEY
from sam3_agent.runs.evaluation.handler import EvalWorkerFactory
from sam3_agent.runs.evaluation.report import ReportFiles, report_runs
from sam3_agent.runs.evaluation.results import SampleResult, VideoSampleResult
from sam3_agent.runs.evaluation.selection import EvalSet, Loaded, VideoEvalSet
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, build_engine, run_in_directory
from sam3_agent.runs.jobs.models import (
    ModelSource,
    agent_identity,
    models_identity,
    name_chat_model,
)
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.errors import UserError

NOT_IDENTITY = ("check_concurrency", "prompts_dir")
"""Settings that do not change any prediction, so a resumed run may change them freely."""

MODES = ("agent", "sam3-only")


@dataclass(frozen=True)
class EvalOutcome:
    """What one call of :func:`evaluate` ran and the report it wrote."""

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
    """Evaluate every sample of ``dataset`` not yet stored in ``out``, then write the report;
    ``loaded``: ``dataset.load()`` already done; ``loading_bars`` None: with ``progress``."""
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
    model_name: str | None = None
    chat_model: ChatModel | None = None
    if sam3_only:
        agent: dict[str, Any] = {"score_threshold": config.score_threshold}
    else:
        model_name, chat_model = name_chat_model(backends, engine.engine)
        agent = agent_identity(config, leave_out=NOT_IDENTITY)
    models = models_identity(backends, model_name, chat=not sam3_only)
    run_settings = {**dataset.identity(mode), **models, "agent": agent}
    meta = {POPULATION_KEY: selection.population.to_json()}
    options = None
    if video:
        options = video_options or VideoOptions()
        run_settings["video"] = options.describe()
    factory = EvalWorkerFactory(
        backends,
        config,
        sam3_only=sam3_only,
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
