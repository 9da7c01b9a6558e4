"""``sam3-agent batch INPUT --out DIR`` (many requests, resumable), and what it shares with
``eval`` (:mod:`.evaluate`) around their one library call: the checks and memory plan before
it, its progress on stderr (a live bar on a terminal, else plain lines), Ctrl+C, the summaries
after."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, Protocol, TypeVar

import typer
from rich.console import Console

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
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.runs.batch.results import BatchTotals, RequestResult
    from sam3_agent.runs.evaluation.report_parts import ReportFiles
    from sam3_agent.runs.evaluation.results import SampleResult, VideoSampleResult
    from sam3_agent.runs.jobs.base import JobResult


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


R = TypeVar("R", bound="JobResult")
R_contra = TypeVar("R_contra", bound="JobResult", contravariant=True)

PLAIN_PROGRESS_INTERVAL_S = 30.0
"""Seconds between progress lines when stderr is not a terminal (a log file)."""


class Tally(Protocol[R_contra]):
    """The running figures a progress line shows after the counts."""

    def add(self, result: R_contra) -> None: ...

    def text(self) -> str: ...


class EvalTally:
    """An evaluation's running metrics and its failures."""

    def __init__(self, running: Any) -> None:
        self.running = running

    def add(self, result: SampleResult | VideoSampleResult) -> None:
        self.running.add(result.scored())

    def text(self) -> str:
        figures = "  ".join(
            f"{name} {'–' if value is None else f'{100 * value:.1f}'}"
            for name, value in self.running.figures()
        )
        return f"{figures}  failed {self.running.failed}"


class BatchTally:
    """Requests by outcome."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, result: RequestResult) -> None:
        self.counts[result.status] += 1

    def text(self) -> str:
        c = self.counts
        return f"masks {c['masks']}  no mask {c['no_mask']}  failed {c['failed']}"


class _Shown(Generic[R]):
    """What both displays keep: the console, the label, the tally (a notice: one line)."""

    def __init__(self, console: Console, label: str, tally: Tally[R]) -> None:
        self._console, self._label, self.tally = console, label, tally

    def notice(self, line: str, *, warning: bool = False) -> None:
        # An engine's notice, its settings written as flags; a live bar's console prints it
        # above the bar, which stays whole.
        line = as_flags(line)
        text = plain(("warning:", "yellow"), f" {line}") if warning else plain(line)
        self._console.print(text, soft_wrap=True)


class ProgressBar(_Shown[R]):
    """A rich progress bar with ETA and the tally's figures."""

    def __init__(self, console: Console, label: str, tally: Tally[R]) -> None:
        from rich import progress as rp

        super().__init__(console, label, tally)
        self._progress = rp.Progress(
            rp.TextColumn(f"[bold]{label}"), rp.BarColumn(), rp.MofNCompleteColumn(),
            rp.TimeElapsedColumn(), rp.TimeRemainingColumn(),
            rp.TextColumn("{task.fields[stats]}"), console=console,
        )  # fmt: skip
        self._task: Any = None

    def start(self, total: int, already_done: Sequence[R]) -> None:
        for r in already_done:
            self.tally.add(r)
        self._progress.start()
        self._task = self._progress.add_task(
            self._label, total=total, completed=len(already_done), stats=self.tally.text()
        )

    def update(self, result: R) -> None:
        self.tally.add(result)
        if self._task is not None:
            self._progress.update(self._task, advance=1, stats=self.tally.text())

    def stop(self) -> None:
        self._progress.stop()


class PlainProgress(_Shown[R]):
    """Progress for a log file: a plain line at the start, at most one per ``interval_s``
    seconds, and one at the end."""

    def __init__(self, console: Console, label: str, tally: Tally[R],
                 interval_s: float = PLAIN_PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__(console, label, tally)
        self._interval_s, self._clock = interval_s, clock
        self._total = self._done = self._resumed = 0
        self._started = self._last_line = 0.0

    def _line(self) -> None:
        now = self._last_line = self._clock()
        elapsed, fresh = now - self._started, self._done - self._resumed
        eta = "–"
        if fresh > 0 and self._total > self._done:
            eta = clock_text(elapsed / fresh * (self._total - self._done))
        percent = 100 * self._done / self._total if self._total else 100.0
        self._console.print(
            f"{self._label} {self._done}/{self._total} ({percent:.0f}%) "
            f"elapsed {clock_text(elapsed)} eta {eta} {self.tally.text()}",
            markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip

    def start(self, total: int, already_done: Sequence[R]) -> None:
        for r in already_done:
            self.tally.add(r)
        self._total, self._done = total, len(already_done)
        self._resumed, self._started = self._done, self._clock()
        self._line()

    def update(self, result: R) -> None:
        self.tally.add(result)
        self._done += 1
        if self._done >= self._total or self._clock() - self._last_line >= self._interval_s:
            self._line()

    def stop(self) -> None:
        if self._last_line and self._done < self._total:
            self._line()


def clock_text(seconds: float) -> str:
    """``H:MM:SS`` of a duration in seconds."""
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def make_progress(
    console: Console, label: str, tally: Tally[R]
) -> ProgressBar[R] | PlainProgress[R]:
    """A live bar on a terminal, plain periodic lines otherwise."""
    return (
        ProgressBar(console, label, tally)
        if console.is_terminal
        else PlainProgress(console, label, tally)
    )
