"""The video report's parts: J, F and J&F per split, overall and per subset, beside
AgentRVOS's published figures (which name no MLLM: "beside", never "the same model")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sam3_agent.runs.evaluation import report_parts as parts
from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, dataset_title
from sam3_agent.runs.evaluation.coverage import partial_text
from sam3_agent.runs.evaluation.methods import VideoMethod
from sam3_agent.runs.evaluation.published import for_dataset
from sam3_agent.runs.evaluation.report_parts import cell, pct
from sam3_agent.runs.evaluation.video.metrics import VideoSummary

OVERALL = "overall"
"""The subset column's name for a split's overall figures."""

INTRO = (
    "Per annotated frame, J is the region IoU and F the contour F-measure as the DAVIS "
    "benchmark defines them (1.0 when prediction and target are both empty); a sample "
    "scores their means over its frames, a group the mean over its samples, and "
    "J&F = (J + F) / 2. The prediction at a frame is the union of the selected tracks. "
    "Failed samples count as empty predictions."
)


@dataclass(frozen=True)
class VideoComparison(parts.Compared):
    """A run's figure beside a published one of its dataset and split (on each of the run's
    splits where the source states none)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "published_method": self.published.method,
            "model": self.published.model,
            "dataset": self.published.dataset,
            "split": self.split,
            "published_split": self.published.split or None,
            "tag": self.published.tag,
            **self.figures(),
        }


def compare_with_published(methods: Sequence[VideoMethod]) -> list[VideoComparison]:
    """Every published figure of a method's dataset beside the method's on the same split."""
    comparisons = []
    for m in methods:
        for r in for_dataset(m.dataset):
            for split in [r.split] if r.split else list(m.metrics):
                summary = m.summary(split, r.tag)
                value = None if summary is None else _value(summary, r.metric)
                if value is not None:
                    coverage = m.coverage(split, r.tag)
                    comparisons.append(VideoComparison(m.label, split, r, 100 * value, coverage))
    return comparisons


def _value(summary: VideoSummary, metric: str) -> float | None:
    return {"J": summary.j, "F": summary.f, "J&F": summary.jf}.get(metric)


def partial_warning(comparisons: Sequence[VideoComparison]) -> str | None:
    """The one line naming each compared run that scored part of its split (or whose
    coverage is unknown); None when there is none."""
    return partial_text(dict.fromkeys((c.method, c.split, c.coverage) for c in comparisons))


def summary_lines(m: VideoMethod) -> list[str]:
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


def dataset_section(dataset: str, methods: Sequence[VideoMethod]) -> list[str]:
    info = VIDEO_DATASETS.get(dataset)
    lines = [f"## {info.title if info else dataset}", ""]
    published = []
    for r in for_dataset(dataset):
        cells = {"J": "–", "F": "–", "J&F": "–"}
        cells[r.metric] = f"{r.value:.1f}"
        split = r.split or "not stated"
        published.append([r.label, split, r.tag or OVERALL, "–", *cells.values(), "whole split"])
    comparisons = compare_with_published(methods)
    warning = partial_warning(comparisons)
    if warning:
        lines += [f"**Warning:** {warning}.", ""]
    header = ["method", "split", "subset", "samples", "J", "F", "J&F"]
    if published:
        header.append("samples scored")
    rows = [row for m in methods for row in _metric_rows(m, bool(published))]
    lines += ["### J / F / J&F (%)", "", parts.table(header, rows + published), ""]
    if info is not None and info.overall_from:
        lines += [
            f"The overall figure is the mean of the {' and '.join(info.overall_from)} "
            "subsets' means, as the official evaluation computes it.",
            "",
        ]
    if published:
        sources = sorted({r.source for r in for_dataset(dataset)})
        lines += [
            f"Rows marked (published): {'; '.join(sources)}. The source does not state which "
            "MLLM produced each figure: they stand beside ours, not as the same model.",
            "",
        ]
    if comparisons:
        lines += ["### Beside the published figures", ""]
        lines += [parts.comparison_table(comparisons, lambda r: r.label, cell), ""]
    run_rows = []
    for m in methods:
        u = m.usage()
        frames = u["frames_scored_per_sample"]
        cost = parts.run_cells(cell(m.label), u)
        run_rows.append([*cost, "–" if frames is None else f"{frames:.1f}"])
    header = [*parts.RUN_HEADER, "frames scored / sample"]
    lines += ["### Run", "", parts.table(header, run_rows), ""]
    failed = [(m.label, i, msg) for m in methods for b in m.metrics.values() for i, msg in b.failed]
    return lines + parts.failed_lines(failed, cell)
