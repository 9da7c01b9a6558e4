"""Reports over video run directories: ``metrics.json`` and ``report.md`` with J, F and J&F.

Runs are merged into methods as for images; each method is scored per split, overall and
per subset tag, with ReVOS's official overall (the mean of its two subsets).

AgentRVOS's published figures (:mod:`~sam3_agent.runs.evaluation.video.published`) stand
beside the run's, marked "(published)". They cover whole splits and name no MLLM, so beside
each the report says how much of the split the run scored (``6/200 (3%)``) and warns in one
line when that is part of it; it never calls them "the same MLLM".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, dataset_title
from sam3_agent.runs.evaluation.coverage import Coverage, partial_text
from sam3_agent.runs.evaluation.methods import VIDEO, MergedRuns, merge_runs, usage_of
from sam3_agent.runs.evaluation.report_parts import (
    RUN_HEADER,
    Compared,
    ReportFiles,
    cell,
    comparison_line,
    comparison_table,
    failed_lines,
    make_report_dir,
    pct,
    run_cells,
    run_dirs_text,
    runs_lines,
    table,
    write_markdown,
    write_metrics,
)
from sam3_agent.runs.evaluation.results import VideoSampleResult
from sam3_agent.runs.evaluation.video.metrics import VideoBreakdown, VideoSummary, breakdown
from sam3_agent.runs.evaluation.video.published import video_published_for
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

OVERALL = "overall"
"""The subset column's name for a split's overall figures."""


@dataclass
class VideoMethod(MergedRuns[VideoSampleResult]):
    """The merged video results of run directories that share their settings but split or
    shard: one row group of the report's tables."""

    metrics: dict[str, VideoBreakdown] = field(init=False)
    """Per split: overall, per subset tag, and the failed samples."""

    def __post_init__(self) -> None:
        info = VIDEO_DATASETS.get(self.dataset)
        overall_from = info.overall_from if info is not None else None
        by_split: dict[str, list[VideoSampleResult]] = {}
        for r in self.results:
            by_split.setdefault(r.split, []).append(r)
        self.metrics = {
            split: breakdown((r.scored() for r in by_split[split]), overall_from=overall_from)
            for split in _ordered(self.dataset, by_split)
        }

    def splits(self) -> list[str]:
        """The splits scored, then the splits recorded with nothing scored yet."""
        return [*self.metrics, *(s for s in self.populations if s not in self.metrics)]

    def summary(self, split: str, tag: str | None = None) -> VideoSummary | None:
        """The split's overall figures (``tag`` None) or its ``tag`` subset's."""
        scored = self.metrics.get(split)
        if scored is None:
            return None
        return scored.overall if tag is None else scored.tags.get(tag)

    def coverage(self, split: str, tag: str | None = None) -> Coverage:
        """Samples of ``split`` (its ``tag`` subset) scored, out of the whole split's.

        Every stored sample of the split counts (ReVOS's overall figure leaves out the
        samples of other types, but they were scored all the same)."""
        scored = sum(r.split == split and (tag is None or tag in r.tags) for r in self.results)
        return Coverage.of(
            scored, self.populations.get(split), self.planned_by_split.get(split), tag
        )

    def usage(self) -> dict[str, Any]:
        n = len(self.results)
        return {
            **usage_of(self.results, self.planned),
            "frames_scored_per_sample": sum(r.frames_scored for r in self.results) / n
            if n
            else None,
        }


def _ordered(dataset: str, splits: Sequence[str] | dict[str, Any]) -> list[str]:
    info = VIDEO_DATASETS.get(dataset)
    known = [s for s in (info.splits if info else ()) if s in splits]
    return known + sorted(set(splits) - set(known))


def load_video_methods(run_dirs: Sequence[Path]) -> list[VideoMethod]:
    """Read video run directories and merge them into methods."""
    return merge_runs(run_dirs, VideoSampleResult.from_json, VIDEO, VideoMethod)


@dataclass(frozen=True)
class VideoComparison(Compared):
    """A run's figure beside a published one of its dataset and split (on each of the run's
    splits where the source states none). The published MLLM is not stated (AgentRVOS runs
    several), so this is "beside", never "against the same model"."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "published_method": self.published.method,
            "model": self.published.model,
            "dataset": self.published.dataset,
            "split": self.split,
            "published_split": self.published.split or None,
            "tag": self.published.tag,
            "metric": self.published.metric,
            "ours": round(self.ours, 2),
            "published": self.published.value,
            "difference": round(self.difference, 2),
            "source": self.published.source,
            "coverage": self.coverage.to_dict(),
        }


def _value(summary: VideoSummary, metric: str) -> float | None:
    return {"J": summary.j, "F": summary.f, "J&F": summary.jf}.get(metric)


def compare_with_published(methods: Sequence[VideoMethod]) -> list[VideoComparison]:
    """Every published figure of a method's dataset, beside the method's figure on the same
    split (on each of its splits where the source does not state one)."""
    comparisons = []
    for m in methods:
        for r in video_published_for(m.dataset):
            for split in [r.split] if r.split else list(m.metrics):
                summary = m.summary(split, r.tag)
                value = _value(summary, r.metric) if summary is not None else None
                if value is not None:
                    coverage = m.coverage(split, r.tag)
                    comparisons.append(VideoComparison(m.label, split, r, 100 * value, coverage))
    return comparisons


def partial_warning(comparisons: Sequence[VideoComparison]) -> str | None:
    """One line naming each run set beside published figures that scored part of its split,
    or whose coverage is unknown; None when there is none."""
    return partial_text(dict.fromkeys((c.method, c.split, c.coverage) for c in comparisons))


def write_video_report(run_dirs: Sequence[Path], out_dir: Path) -> ReportFiles:
    """Write ``metrics.json`` and ``report.md`` for video run directories."""
    methods = load_video_methods(run_dirs)
    make_report_dir(out_dir)
    comparisons = compare_with_published(methods)
    warning = partial_warning(comparisons)
    datasets = list(dict.fromkeys(m.dataset for m in methods))
    metrics_path = write_metrics(
        out_dir,
        published=[r for d in datasets for r in video_published_for(d)],
        comparisons=comparisons,
        warning=warning,
        methods=[
            m.describe(
                usage=m.usage(),
                coverage={s: m.coverage(s).to_dict() for s in m.splits()},
                metrics={s: b.to_dict() for s, b in m.metrics.items()},
            )
            for m in methods
        ],
        kind=VIDEO,
    )
    report_path = write_markdown(out_dir, render_markdown(methods))
    summary = [line for m in methods for line in _summary_lines(m)]
    summary += [comparison_line(c, "beside") for c in comparisons]
    return ReportFiles(metrics_path, report_path, methods, comparisons, warning, summary)


def _summary_lines(m: VideoMethod) -> list[str]:
    """Per split: J, F, J&F overall and J&F per subset."""
    lines = []
    for split, scored in m.metrics.items():
        o = scored.overall
        subsets = ", ".join(f"{tag} {pct(s.jf)}" for tag, s in scored.tags.items())
        lines.append(
            f"{m.label}: {dataset_title(m.dataset)} {split}: {m.coverage(split).scored} "
            f"samples, J {pct(o.j)}, F {pct(o.f)}, J&F {pct(o.jf)}"
            + (f" (J&F by subset: {subsets})" if subsets else "")
            + f", failed {o.failed}"
        )
    return lines


def _metric_rows(m: VideoMethod, with_coverage: bool) -> list[list[str]]:
    rows = []
    for split, scored in m.metrics.items():
        subsets: list[tuple[str, str | None, VideoSummary]] = [(OVERALL, None, scored.overall)]
        subsets += [(tag, tag, s) for tag, s in scored.tags.items()]
        for name, tag, s in subsets:
            row = [cell(m.label), split, name, str(s.count), pct(s.j), pct(s.f), pct(s.jf)]
            if with_coverage:
                row.append(m.coverage(split, tag).text)
            rows.append(row)
    return rows


def _published_rows(dataset: str) -> list[list[str]]:
    rows = []
    for r in video_published_for(dataset):
        cells = {"J": "–", "F": "–", "J&F": "–"}
        cells[r.metric] = f"{r.value:.1f}"
        subset = r.tag or OVERALL
        split = r.split or "not stated"
        rows.append([r.label, split, subset, "–", *cells.values(), "whole split"])
    return rows


def _dataset_section(dataset: str, methods: Sequence[VideoMethod]) -> list[str]:
    info = VIDEO_DATASETS.get(dataset)
    lines = [f"## {info.title if info else dataset}", ""]
    published = _published_rows(dataset)
    comparisons = compare_with_published(methods)
    warning = partial_warning(comparisons)
    if warning:
        lines += [f"**Warning:** {warning}.", ""]
    header = ["method", "split", "subset", "samples", "J", "F", "J&F"]
    if published:
        header.append("samples scored")
    rows = [row for m in methods for row in _metric_rows(m, bool(published))]
    lines += ["### J / F / J&F (%)", "", table(header, rows + published), ""]
    if info is not None and info.overall_from:
        lines += [
            f"The overall figure is the mean of the {' and '.join(info.overall_from)} "
            "subsets' means, as the official evaluation computes it.",
            "",
        ]
    if published:
        sources = sorted({r.source for r in video_published_for(dataset)})
        lines += [
            f"Rows marked (published): {'; '.join(sources)}. The source does not state which "
            "MLLM produced each figure: they stand beside ours, not as the same model.",
            "",
        ]
    if comparisons:
        lines += ["### Beside the published figures", ""]
        lines += [comparison_table(comparisons, lambda r: r.label, cell), ""]
    run_rows = []
    for m in methods:
        u = m.usage()
        frames = u["frames_scored_per_sample"]
        run_rows.append([*run_cells(cell(m.label), u), "–" if frames is None else f"{frames:.1f}"])
    lines += ["### Run", "", table([*RUN_HEADER, "frames scored / sample"], run_rows), ""]
    failed = [(m.label, i, msg) for m in methods for b in m.metrics.values() for i, msg in b.failed]
    lines += failed_lines(failed, cell)
    return lines


def render_markdown(methods: Sequence[VideoMethod]) -> str:
    """The report as Markdown: one section per dataset."""
    lines = [
        "# sam3-agent video evaluation report",
        "",
        f"sam3-agent {__version__}; {run_dirs_text(methods)}. "
        "Per annotated frame, J is the region IoU and F the contour F-measure as the DAVIS "
        "benchmark defines them (1.0 when prediction and target are both empty); a sample "
        "scores their means over its frames, a group the mean over its samples, and "
        "J&F = (J + F) / 2. The prediction at a frame is the union of the selected tracks. "
        "Failed samples count as empty predictions.",
        "",
    ]
    for dataset in dict.fromkeys(m.dataset for m in methods):
        lines += _dataset_section(dataset, [m for m in methods if m.dataset == dataset])
    lines += runs_lines(methods, cell)
    return "\n".join(lines).rstrip() + "\n"
