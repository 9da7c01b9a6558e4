"""``sam3-agent batch INPUT --out DIR``: many requests, resumable: flags checked, requests
loaded, then one library call (:func:`~sam3_agent.runs.batch.run.run_batch`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli import jobs
from sam3_agent.apps.cli.console import err_console, one_line_errors, say
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS, VIDEO, VideoFlags
from sam3_agent.apps.cli.flags.jobs import ENGINE, OutDirOpt, ProgressOpt, RetryFailedOpt
from sam3_agent.apps.cli.progress import BatchTally, make_progress
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.values.config import AgentConfig


@with_flags(BACKENDS, AGENT, ENGINE, VIDEO, DOWNLOADS, VERBOSE)
def batch_command(
    source: Annotated[Path, typer.Argument(metavar="INPUT", show_default=False,
        help="A .jsonl or .csv file (image or video, query, optional id; a video's optional "
        "stride, max_frames, start, end, fps) or a folder of images.")],
    out: OutDirOpt,
    query: Annotated[str | None, typer.Option("--query", metavar="QUERY", rich_help_panel="Input",
        help="The query for every image of a folder INPUT.")] = None,
    retry_failed: RetryFailedOpt = False, progress: ProgressOpt = True, *,
    backends: BackendSpec, config: AgentConfig, engine: EngineOptions, video_flags: VideoFlags,
    max_download_mb: int,
) -> None:  # fmt: skip
    """Run the agent on many requests; rerun the same command to resume after a stop.

    Each request's result.json, overlay.png and trace.jsonl go to DIR/<id>/
    (a video's overlay.mp4 and contact_sheet.png instead of the PNG overlay),
    and DIR/summary.jsonl lists every request's outcome. The video flags choose
    the frames of a video row that names none (its own keys win) and what the
    model is shown.

    Exit codes: 0 done (failed requests are counted, not fatal), 1 backend error,
    2 bad input, 130 interrupted (finished requests are kept).
    """
    with one_line_errors():
        backends = replace(backends, video_cache_mb=video_flags.cache_mb)
        jobs.check_before_loading(backends, config, engine, out, chat=True)
        from sam3_agent.runs.batch.requests import load_requests
        from sam3_agent.runs.batch.run import run_batch

        requests = load_requests(source, query=query, frames=video_flags.selection)
        backends = jobs.plan_for(backends, engine, video=any(r.media == "video" for r in requests))
        bar = make_progress(err_console, "batch", BatchTally()) if progress else None
        with jobs.kept_when_interrupted(out, "requests", bar):
            done = run_batch(
                requests, out, backends, config=config, engine=engine,
                retry_failed=retry_failed, progress=bar, video_options=video_flags.options,
                max_download_mb=max_download_mb,
            )  # fmt: skip
    outcome, rate = done.run, done.requests_per_s
    say(
        f"{outcome.ran} run, {outcome.skipped} already stored, {outcome.failed} failed "
        f"in {done.wall_s:.1f} s ({'-' if rate is None else f'{rate:.2f}'} requests/s)"
    )
    jobs.print_batch_totals(done.totals, out)
