"""``run_batch``, what ``sam3-agent batch`` does: many (image or video, query) requests into
``out`` on any engine, resumed when called again with the same settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB, Downloads
from sam3_agent.runs.batch.requests import BatchRequest, fetch_urls, load_requests
from sam3_agent.runs.batch.results import SUMMARY_NAME, BatchTotals, RequestResult, write_summary
from sam3_agent.runs.batch.workers import BatchWorkerFactory
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, build_engine, run_in_directory
from sam3_agent.runs.jobs.models import (
    ModelSource,
    agent_identity,
    models_identity,
    name_chat_model,
)
from sam3_agent.values.config import AgentConfig, VideoOptions

DOWNLOADS = "downloads"  # the folder of out where the URL rows' downloads are kept

NOT_IDENTITY = ("check_concurrency", "prompts_dir", "max_image_pixels")
"""Settings that change no answer, so a resumed batch may change them freely (the pixel
limit only refuses images: failures that ``retry_failed`` runs again under a new limit)."""


@dataclass(frozen=True)
class BatchOutcome:
    """What one call of :func:`run_batch` did (``run``) and what the batch now holds."""

    run: RunOutcome
    totals: BatchTotals
    summary: Path

    @property
    def wall_s(self) -> float:
        """Wall-clock seconds of this call's run (``totals.time_s`` sums per-request times)."""
        return self.run.wall_s

    @property
    def requests_per_s(self) -> float | None:
        """Requests run by this call per wall-clock second; None when none ran."""
        return self.run.per_second


def batch_settings(
    backends: ModelSource,
    config: AgentConfig,
    model_name: str,
    video_options: VideoOptions | None = None,
) -> dict[str, Any]:
    """The settings a batch's run directory is made (and resumed only) with."""
    settings = {
        "command": "batch",
        **models_identity(backends, model_name),
        "agent": agent_identity(config, leave_out=NOT_IDENTITY),
    }
    if video_options is not None and video_options != VideoOptions():
        settings["video"] = video_options.describe()
    return settings


def run_batch(
    requests: Sequence[BatchRequest] | Path,
    out: Path,
    backends: ModelSource,
    *,
    query: str | None = None,
    config: AgentConfig | None = None,
    video_options: VideoOptions | None = None,
    engine: EngineOptions | None = None,
    retry_failed: bool = False,
    progress: ProgressListener[RequestResult] | None = None,
    loading_bars: bool | None = None,
    max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
) -> BatchOutcome:
    """Run every request not yet stored in ``out``, then write ``out/summary.jsonl``;
    ``requests`` may be a file or folder (with ``query`` for a folder), URLs are fetched first."""
    if isinstance(requests, Path):
        requests = load_requests(requests, query=query)
    if any(r.url is not None for r in requests):
        requests = fetch_urls(list(requests), Downloads(out / DOWNLOADS, max_download_mb))
    config = config or AgentConfig()
    video_options = video_options or VideoOptions()
    engine = engine or EngineOptions()
    runner = build_engine(engine)  # checks the options before any model loads
    model_name, chat_model = name_chat_model(backends, engine.engine)
    settings = batch_settings(backends, config, model_name, video_options)
    bars = progress is not None if loading_bars is None else loading_bars
    media = {r.media for r in requests}
    factory = BatchWorkerFactory(
        backends, config, chat_model=chat_model, loading_bars=bars,
        video_options=video_options, images="image" in media, videos="video" in media,
    )  # fmt: skip
    outcome, results = run_in_directory(
        requests, out, settings, RequestResult.from_json, runner, factory, progress, retry_failed
    )
    totals = write_summary(out, requests, results)
    return BatchOutcome(run=outcome, totals=totals, summary=out / SUMMARY_NAME)
