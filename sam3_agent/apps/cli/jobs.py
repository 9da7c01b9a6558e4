"""What ``eval`` and ``batch`` share around their one library call: the memory plan, Ctrl+C,
the progress tallies, the summaries at the end. Nothing heavy at module level (``--help``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sam3_agent.apps.cli.console import EXIT_INTERRUPTED, out_console, plain, say
from sam3_agent.apps.cli.flags.agent import check_agent
from sam3_agent.apps.cli.progress import PlainProgress, ProgressBar
from sam3_agent.apps.cli.setting_flags import as_flags
from sam3_agent.backends.spec import check_writable_dir

if TYPE_CHECKING:
    from sam3_agent.backends.spec import BackendSpec
    from sam3_agent.runs.batch.results import RequestResult
    from sam3_agent.runs.batch.summary import BatchTotals
    from sam3_agent.runs.evaluation.report_parts import ReportFiles
    from sam3_agent.runs.evaluation.results import SampleResult
    from sam3_agent.runs.evaluation.video.results import VideoSampleResult
    from sam3_agent.runs.jobs.base import EngineOptions
    from sam3_agent.values.config import AgentConfig

Bar = ProgressBar | PlainProgress | None


def plan_for(
    spec: BackendSpec, engine: EngineOptions, *, chat: bool = True, video: bool = False
) -> BackendSpec:
    """Which default MLLM, and do the models fit (SAM 3's video model with ``video``): before
    any download. Only where they load here: Ray workers load them on machines whose memory
    this one cannot see (and there the flags name the MLLM:
    :meth:`BackendSpec.require_model_name`)."""
    if engine.engine != "local":
        return spec
    plan = spec.plan(chat=chat, video=video)
    if plan.note:
        say(as_flags(plan.note))
    return plan.spec


def check_before_loading(
    backends: BackendSpec, config: AgentConfig, engine: EngineOptions, out: Path, *, chat: bool
) -> None:
    """Every flag and path first, the cheap ones before those that import the agent: a
    refusal must not cost minutes of loading models. ``chat``: an MLLM is used."""
    backends.validate(chat=chat)
    check_writable_dir(out, "--out")
    if chat:
        backends.require_model_name(engine.engine)
    check_agent(config, backends, chat=chat)


@contextlib.contextmanager
def kept_when_interrupted(out: Path, what: str, bar: Bar = None) -> Iterator[None]:
    """Stop the progress display at the end; Ctrl+C: say that the finished ``what`` are kept
    in ``out``; exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        say(("interrupted", "yellow"), f": finished {what} are kept in {out}; run the same "
            "command to resume.")  # fmt: skip
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if bar is not None:
            bar.stop()


class EvalTally:
    """Running figures of an evaluation and its failures, for the progress display:
    ``running`` is the library's running metrics of the dataset (gIoU / cIoU, or J, F and
    J&F: :func:`~sam3_agent.runs.evaluation.running.running_metrics`)."""

    def __init__(self, running: Any) -> None:
        self.running = running

    def add(self, result: SampleResult | VideoSampleResult) -> None:
        self.running.add(result.scored())

    def text(self) -> str:
        figures = "  ".join(f"{name} {_pct(value)}" for name, value in self.running.figures())
        return f"{figures}  failed {self.running.failed}"


class BatchTally:
    """Requests by outcome, for the progress display."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, result: RequestResult) -> None:
        self.counts[result.status] += 1

    def text(self) -> str:
        c = self.counts
        return f"masks {c['masks']}  no mask {c['no_mask']}  failed {c['failed']}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def print_report_summary(files: ReportFiles) -> None:
    """The report's summary on stdout (a line per method, or method and split, and per
    published figure set beside it: labels name models, so plain text), a warning on stderr
    when a compared run is partial, and the report's path."""
    for line in files.summary:
        say(line, console=out_console)
    if files.partial_warning:
        say(("warning:", "yellow"), f" {files.partial_warning}")
    say(f"report: {files.report_md}", console=out_console)


def print_batch_totals(totals: BatchTotals, out: Path) -> None:
    """The batch's outcome as a table on stdout, and where its summary lies."""
    from rich.console import Console
    from rich.table import Table

    from sam3_agent.runs.batch.summary import SUMMARY_NAME

    table = Table(title=plain(f"batch {out}"), show_edge=False)
    columns = ("requests", "masks", "no mask", "failed", "missing", "tokens", "request time (s)")
    for column in columns:
        table.add_column(column, justify="right")
    s = totals.by_status
    table.add_row(
        str(totals.requests),
        str(s["masks"]),
        str(s["no_mask"]),
        str(s["failed"]),
        str(totals.missing),
        str(totals.prompt_tokens + totals.completion_tokens),
        f"{totals.time_s:.1f}",
    )
    console = Console(highlight=False)
    console.print(table)
    say(f"summary: {out / SUMMARY_NAME}", console=console)
