"""The parts every report is built from: the published comparison, the files written, the
markdown tables and the per-sample difference lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.runs.evaluation.coverage import Coverage
from sam3_agent.runs.evaluation.differences import SHOWN, Differences, SampleDifference
from sam3_agent.runs.evaluation.methods import MergedRuns
from sam3_agent.runs.evaluation.published import PublishedResult
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import atomic_write_bytes, utf8
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

Escape = Callable[[str], str]

RUN_HEADER = ("method", "samples", "failed", "mean rounds", "tokens / sample", "s / sample")
"""The run-cost table's columns (a report may add its own after them)."""


@dataclass(frozen=True)
class Compared:
    """A run's figure beside a published one: the run's ``split``, ``ours`` in percent, and
    how much of the published figure's split (or tag subset) the run scored."""

    method: str
    split: str
    published: PublishedResult
    ours: float
    coverage: Coverage
    video: bool = False

    @property
    def difference(self) -> float:
        """Ours minus published, in percentage points."""
        return self.ours - self.published.value

    def to_dict(self) -> dict[str, Any]:
        """The comparison as ``metrics.json`` lists it; a video one names the published
        method, the run's split and the published one (null when unstated)."""
        p = self.published
        where: dict[str, Any] = {"model": p.model, "dataset": p.dataset, "split": self.split}
        if self.video:
            tail = {"published_split": p.split or None, "tag": p.tag}
            where = {"published_method": p.method, **where, **tail}
        return {
            "method": self.method,
            **where,
            "metric": self.published.metric,
            "ours": round(self.ours, 2),
            "published": self.published.value,
            "difference": round(self.difference, 2),
            "source": self.published.source,
            "coverage": self.coverage.to_dict(),
        }


@dataclass(frozen=True)
class ReportFiles:
    """What a report wrote, its terminal ``summary`` lines and its coverage warning; only an
    image report draws the ``histogram`` and the ``gallery``."""

    metrics_json: Path
    report_md: Path
    methods: Sequence[Any]
    comparisons: Sequence[Compared] = ()
    partial_warning: str | None = None
    summary: Sequence[str] = ()
    histogram: Path | None = None
    gallery: list[Path] = field(default_factory=list)


def comparison_line(c: Compared, relation: str) -> str:
    """``label against|beside published: split [tag] metric ours vs theirs (diff), samples
    scored 6/200 (3%)``."""
    p = c.published
    return (
        f"{c.method} {relation} {p.label}: {c.split}{f' {p.tag}' if p.tag else ''} {p.metric} "
        f"{c.ours:.1f} vs {p.value:.1f} ({c.difference:+.1f}), samples scored {c.coverage.text}"
    )


def cell(text: str) -> str:
    """Text from a model's name or a failure message, safe inside a table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def make_report_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create report directory {out_dir}: {e}") from e


def published_entry(r: PublishedResult, kind: str | None = None) -> dict[str, Any]:
    """A published figure as ``metrics.json`` lists it; a video one (``kind`` set) names its
    method and writes an unstated model or split as null."""
    names = ("model", "dataset", "split", "tag", "metric", "value", "source")
    entry = {name: getattr(r, name) for name in names}
    if kind is None:
        return entry
    return {"method": r.method, **entry, "model": r.model or None, "split": r.split or None}


def write_metrics(
    out_dir: Path,
    *,
    published: Iterable[PublishedResult],
    comparisons: Sequence[Compared],
    warning: str | None,
    methods: Iterable[MergedRuns[Any]],
    differences: Sequence[Differences],
    kind: str | None = None,
) -> Path:
    """``metrics.json`` in ``out_dir``; ``kind``: what the runs scored, when not images."""
    doc = {
        "version": __version__,
        **({"kind": kind} if kind is not None else {}),
        "published": [published_entry(r, kind) for r in published],
        "compared_with_published": [c.to_dict() for c in comparisons],
        "partial_warning": warning,
        "methods": [
            {
                "label": m.label,
                "config": m.config,
                "run_dirs": [str(d) for d in m.run_dirs],
                "usage": m.usage(),
                "coverage": {s: m.coverage(s).to_dict() for s in m.splits()},
                "metrics": m.metrics_json(),
            }
            for m in methods
        ],
        "sample_differences": [d.to_dict() for d in differences],
    }
    path = out_dir / "metrics.json"
    atomic_write_bytes(path, json.dumps(doc, indent=2).encode())
    return path


def write_markdown(
    out_dir: Path,
    title: str,
    intro: str,
    methods: Sequence[MergedRuns[Any]],
    sections: Iterable[str],
    escape: Escape = str,
) -> Path:
    """``report.md`` in ``out_dir``: ``title``, ``intro``, the ``sections``, then the runs."""
    dirs = sum(len(m.run_dirs) for m in methods)
    read = f"sam3-agent {__version__}; {dirs} run director{'y' if dirs == 1 else 'ies'}. {intro}"
    lines = [f"# {title}", "", read, "", *sections, "## Runs", ""]
    for m in methods:
        settings = ", ".join(f"{k}={v}" for k, v in m.config.items() if k != "agent")
        where = ", ".join(str(d) for d in m.run_dirs)
        lines.append(f"- **{escape(m.label)}**: {escape(settings)}; from {where}")
    path = out_dir / "report.md"
    atomic_write_bytes(path, utf8("\n".join(lines).rstrip() + "\n"))
    logger.info("report written to %s", path)
    return path


def comparison_table(
    comparisons: Sequence[Compared],
    published_name: Callable[[PublishedResult], str],
    escape: Escape = str,
) -> str:
    """Each run figure beside its published one, with how much of the split the run scored."""
    header = ["method", "published", "split", "metric", "ours", "published", "difference"]
    rows = []
    for c in comparisons:
        names = [escape(c.method), published_name(c.published), c.split, c.published.metric]
        figures = [f"{c.ours:.1f}", f"{c.published.value:.1f}", f"{c.difference:+.1f}"]
        rows.append([*names, *figures, c.coverage.text])
    return table([*header, "samples scored"], rows)


def run_cells(label: str, usage: dict[str, Any], *, agent: bool = True) -> list[str]:
    """A method's :data:`RUN_HEADER` row; rounds and tokens "–" unless ``agent``."""
    stored = str(usage["samples"])
    if usage["planned"] not in (None, usage["samples"]):
        stored += f" of {usage['planned']}"
    rounds, tokens = usage["mean_rounds"], usage["tokens_per_sample"]
    return [
        label,
        stored,
        str(usage["failed"]),
        "–" if rounds is None or not agent else f"{rounds:.2f}",
        "–" if tokens is None or not agent else f"{tokens:.0f}",
        "–" if usage["mean_time_s"] is None else f"{usage['mean_time_s']:.2f}",
    ]


def failed_lines(failed: Sequence[tuple[str, str, str]], escape: Escape = str) -> list[str]:
    """The failed-samples section from ``(method label, sample id, message)``: the first 50."""
    if not failed:
        return []
    lines = ["### Failed samples (scored as empty predictions)", ""]
    lines += [f"- {escape(label)}: `{i}`: {escape(msg)}" for label, i, msg in failed[:50]]
    if len(failed) > 50:
        lines.append(f"- ... and {len(failed) - 50} more (see metrics.json)")
    return [*lines, ""]


def _figures(s: SampleDifference) -> tuple[str, str]:
    """The baseline's and the other method's figure, each marked when the sample failed."""
    pairs = ((s.baseline, s.baseline_failed), (s.other, s.other_failed))
    before, after = (f"{v:.3f}" + (" (failed)" if failed else "") for v, failed in pairs)
    return before, after


def difference_lines(found: Sequence[Differences], escape: Escape = str) -> list[str]:
    """The per-sample section: per pair of methods, the :data:`SHOWN` largest differences."""
    if not found:
        return []
    lines = ["## Per-sample differences", ""]
    for d in found:
        lines += [f"### {escape(d.title)} ({d.dataset})", "", f"{d.headline()}.", ""]
        if not d.samples:
            continue
        header = ["sample", escape(d.baseline), escape(d.other), "difference"]
        rows = [[cell(s.id), *_figures(s), f"{s.delta:+.3f}"] for s in d.shown]
        lines += [table(header, rows), ""]
        if d.more:
            lines += [f"... and {d.more} more (the {SHOWN} largest are listed).", ""]
    return lines


def difference_summary(d: Differences) -> list[str]:
    """The terminal summary's lines for one pair of methods."""
    lines = [f"{d.title}: {d.dataset}: {d.headline()}"]
    for s in d.shown:
        before, after = _figures(s)
        lines.append(f"  {s.id}: {before} -> {after} ({s.delta:+.3f})")
    if d.more:
        lines.append(f"  ... and {d.more} more")
    return lines
