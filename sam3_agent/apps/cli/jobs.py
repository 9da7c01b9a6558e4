"""What ``eval`` and ``batch`` share around their one library call: the checks and memory
plan before it, Ctrl+C, the summaries after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sam3_agent.apps.cli.console import EXIT_INTERRUPTED, as_flags, out_console, plain, say
from sam3_agent.apps.cli.flags.agent import check_agent
from sam3_agent.apps.cli.progress import PlainProgress, ProgressBar
from sam3_agent.backends.spec import check_writable_dir

if TYPE_CHECKING:
    from sam3_agent.backends.spec import BackendSpec
    from sam3_agent.runs.batch.results import BatchTotals
    from sam3_agent.runs.evaluation.report_parts import ReportFiles
    from sam3_agent.runs.jobs.base import EngineOptions
    from sam3_agent.values.config import AgentConfig


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
