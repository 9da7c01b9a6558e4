"""What ``eval`` and ``batch`` share around their one library call
(:func:`~sam3_agent.runs.evaluation.run.evaluate`, :func:`~sam3_agent.runs.batch.run.run_batch`):
the memory plan, Ctrl+C, the running tallies of the progress display, and the summaries
printed at the end.

Nothing heavy is imported at module level: ``eval --help`` and ``batch --help`` stay light.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sam3_agent.apps.cli.console import EXIT_INTERRUPTED, out_console, plain, say
from sam3_agent.apps.cli.progress import PlainProgress, ProgressBar
from sam3_agent.apps.cli.setting_flags import as_flags

if TYPE_CHECKING:
    from sam3_agent.backends.spec import BackendSpec
    from sam3_agent.runs.batch.results import RequestResult
    from sam3_agent.runs.batch.summary import BatchTotals
    from sam3_agent.runs.evaluation.report import ReportFiles
    from sam3_agent.runs.evaluation.results import SampleResult
    from sam3_agent.runs.evaluation.video.report import VideoReportFiles
    from sam3_agent.runs.evaluation.video.results import VideoSampleResult
    from sam3_agent.runs.jobs.base import EngineOptions

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
    """Running gIoU / cIoU and failures, for the progress display."""

    def __init__(self) -> None:
        from sam3_agent.runs.evaluation.metrics import RunningMetrics

        self.running: Any = RunningMetrics()

    def add(self, result: SampleResult) -> None:
        self.running.add(result.scored())

    def text(self) -> str:
        running = self.running
        return f"gIoU {_pct(running.giou)}  cIoU {_pct(running.ciou)}  failed {running.failed}"


class VideoEvalTally:
    """Running J, F and J&F of a video dataset (its official overall: ReVOS's is the mean of
    its referring and reasoning subsets) and failures, for the progress display."""

    def __init__(self, dataset: str) -> None:
        from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS

        info = VIDEO_DATASETS.get(dataset)
        self.overall_from = info.overall_from if info is not None else None
        self.sums: dict[str | None, list[float]] = {}  # tag (None: all) -> [count, ΣJ, ΣF]
        self.failed = 0

    def add(self, result: VideoSampleResult) -> None:
        for key in (None, *result.tags):
            sums = self.sums.setdefault(key, [0, 0.0, 0.0])
            sums[0] += 1
            sums[1] += result.j
            sums[2] += result.f
        self.failed += int(result.failed)

    def _mean(self, keys: tuple[str | None, ...]) -> tuple[float | None, float | None]:
        parts = [self.sums[k] for k in keys if k in self.sums]
        if not parts:
            return None, None
        return (
            sum(p[1] / p[0] for p in parts) / len(parts),
            sum(p[2] / p[0] for p in parts) / len(parts),
        )

    def text(self) -> str:
        j, f = self._mean(self.overall_from or (None,))
        jf = None if j is None or f is None else (j + f) / 2
        return f"J {_pct(j)}  F {_pct(f)}  J&F {_pct(jf)}  failed {self.failed}"


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
    """One line per method (its label names a model: plain text), one per published figure
    it is compared with (and how much of the split it scored), a warning on stderr when a
    compared run is partial, and the report's path."""
    for m in files.methods:
        overall = m.metrics.overall
        say(
            f"{m.label}: {overall.count} samples, gIoU {_pct(overall.giou)}, "
            f"cIoU {_pct(overall.ciou)}, failed {overall.failed}",
            console=out_console,
        )
    for c in files.comparisons:
        p = c.published
        say(
            f"{c.method} against {p.label}: {p.split}{f' {p.tag}' if p.tag else ''} {p.metric} "
            f"{c.ours:.1f} vs {p.value:.1f} ({c.difference:+.1f}), "
            f"samples scored {c.coverage.text}",
            console=out_console,
        )
    if files.partial_warning:
        say(("warning:", "yellow"), f" {files.partial_warning}")
    say(f"report: {files.report_md}", console=out_console)


def print_video_report_summary(files: VideoReportFiles) -> None:
    """As :func:`print_report_summary`, for video runs: one line per method and split (J, F,
    J&F overall and J&F per subset), one per published figure beside it with how much of
    the split the run scored, the warning on stderr when that is part of it, and the path."""
    from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS

    for m in files.methods:
        info = VIDEO_DATASETS.get(m.dataset)
        title = info.title if info is not None else m.dataset
        for split, scored in m.metrics.items():
            o = scored.overall
            subsets = ", ".join(f"{tag} {_pct(s.jf)}" for tag, s in scored.tags.items())
            say(
                f"{m.label}: {title} {split}: {m.coverage(split).scored} samples, J {_pct(o.j)}, "
                f"F {_pct(o.f)}, J&F {_pct(o.jf)}"
                + (f" (J&F by subset: {subsets})" if subsets else "")
                + f", failed {o.failed}",
                console=out_console,
            )
    for c in files.comparisons:
        p = c.published
        say(
            f"{c.method} beside {p.label}: {c.split}{f' {p.tag}' if p.tag else ''} {p.metric} "
            f"{c.ours:.1f} vs {p.value:.1f} ({c.difference:+.1f}), "
            f"samples scored {c.coverage.text}",
            console=out_console,
        )
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
