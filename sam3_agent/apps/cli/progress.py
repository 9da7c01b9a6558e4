"""Progress on stderr for ``eval`` and ``batch``: a live bar on a terminal, else plain lines."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from rich.console import Console

from sam3_agent.apps.cli.console import as_flags, plain

if TYPE_CHECKING:
    from sam3_agent.runs.batch.results import RequestResult
    from sam3_agent.runs.evaluation.results import SampleResult, VideoSampleResult
    from sam3_agent.runs.jobs.base import JobResult

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
