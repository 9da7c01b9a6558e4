"""``sam3-agent batch INPUT --out DIR`` (many requests, resumable), and what it shares with
``eval`` (:mod:`.evaluate`) around their one library call: the checks and memory plan before
it, Ctrl+C, the summaries after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sam3_agent.apps.cli.console import (
    EXIT_INTERRUPTED,
    as_flags,
    err_console,
    one_line_errors,
    out_console,
    plain,
    say,
)
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, check_agent
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS, VIDEO, VideoFlags
from sam3_agent.apps.cli.flags.jobs import ENGINE, OutDirOpt, ProgressOpt, RetryFailedOpt
from sam3_agent.apps.cli.progress import BatchTally, PlainProgress, ProgressBar, make_progress
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.runs.batch.results import BatchTotals
    from sam3_agent.runs.evaluation.report_parts import ReportFiles


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
        check_before_loading(backends, config, engine, out, chat=True)
        from sam3_agent.runs.batch.requests import load_requests
        from sam3_agent.runs.batch.run import run_batch

        requests = load_requests(source, query=query, frames=video_flags.selection)
        backends = plan_for(backends, engine, video=any(r.media == "video" for r in requests))
        bar = make_progress(err_console, "batch", BatchTally()) if progress else None
        with kept_when_interrupted(out, "requests", bar):
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
    print_batch_totals(done.totals, out)


def plan_for(
    spec: BackendSpec, engine: EngineOptions, *, chat: bool = True, video: bool = False
) -> BackendSpec:
    """Which default MLLM, and do the models fit, before any download; only where they load
    here (Ray workers load them on machines whose memory this one cannot see)."""
    if engine.engine != "local":
        return spec
    plan = spec.plan(chat=chat, video=video)
    if plan.note:
        say(as_flags(plan.note))
    return plan.spec


def check_before_loading(
    backends: BackendSpec, config: AgentConfig, engine: EngineOptions, out: Path, *, chat: bool
) -> None:
    """Every flag and path, the cheap ones first, before any model loads."""
    backends.validate(chat=chat)
    check_writable_dir(out, "--out")
    if chat:
        backends.require_model_name(engine.engine)
    check_agent(config, backends, chat=chat)


@contextlib.contextmanager
def kept_when_interrupted(
    out: Path, what: str, bar: ProgressBar | PlainProgress | None = None
) -> Iterator[None]:
    """Stop the progress display at the end; Ctrl+C: say what is kept, exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        say(("interrupted", "yellow"), f": finished {what} are kept in {out}; run the same "
            "command to resume.")  # fmt: skip
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if bar is not None:
            bar.stop()


def print_report_summary(files: ReportFiles) -> None:
    """The report's summary and path on stdout, a partial run's warning on stderr."""
    for line in files.summary:
        say(line, console=out_console)
    if files.partial_warning:
        say(("warning:", "yellow"), f" {files.partial_warning}")
    say(f"report: {files.report_md}", console=out_console)


BATCH_COLUMNS = ("requests", "masks", "no mask", "failed", "missing", "tokens", "request time (s)")


def print_batch_totals(totals: BatchTotals, out: Path) -> None:
    """The batch's outcome as a table on stdout, and where its summary lies."""
    from rich.console import Console
    from rich.table import Table

    from sam3_agent.runs.batch.results import SUMMARY_NAME

    table = Table(title=plain(f"batch {out}"), show_edge=False)
    for column in BATCH_COLUMNS:
        table.add_column(column, justify="right")
    s, tokens = totals.by_status, totals.prompt_tokens + totals.completion_tokens
    counts = (totals.requests, s["masks"], s["no_mask"], s["failed"], totals.missing, tokens)
    table.add_row(*map(str, counts), f"{totals.time_s:.1f}")
    console = Console(highlight=False)
    console.print(table)
    say(f"summary: {out / SUMMARY_NAME}", console=console)
