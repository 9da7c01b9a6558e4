"""The report over run directories of one kind: ``metrics.json`` and ``report.md``, a row per
method and a section per dataset (images also get the IoU histogram and the gallery)."""

from __future__ import annotations

import io
import json
import logging
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, dataset_title
from sam3_agent.runs.evaluation.coverage import Coverage, partial_text
from sam3_agent.runs.evaluation.methods import (
    VIDEO,
    MergedRuns,
    Method,
    VideoMethod,
    load_methods,
    ordered_splits,
    runs_kind,
)
from sam3_agent.runs.evaluation.metrics import PR_THRESHOLDS
from sam3_agent.runs.evaluation.published import PublishedResult, for_dataset, matches
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.evaluation.video.metrics import VideoSummary
from sam3_agent.runs.jobs.store import job_dir_name
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.files import atomic_write_bytes, utf8, write_png
from sam3_agent.values.images import RGBImage, load_image
from sam3_agent.values.rle import decode_rle
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

EPSILON = 1e-3
"""A change of the figure up to this (on the ``[0, 1]`` scale) is no difference."""
SHOWN = 20
"""Differences listed per pair of methods; the rest are counted."""


@dataclass(frozen=True)
class SampleDifference:
    """One sample's figure in the baseline and in the other method, in ``[0, 1]``."""

    id: str
    baseline: float
    other: float
    baseline_failed: bool
    other_failed: bool

    @property
    def delta(self) -> float:
        """The other method's figure minus the baseline's."""
        return self.other - self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "baseline": round(self.baseline, 4),
            "other": round(self.other, 4),
            "delta": round(self.delta, 4),
            "baseline_failed": self.baseline_failed,
            "other_failed": self.other_failed,
        }


@dataclass(frozen=True)
class Differences:
    """Where ``other`` differs from ``baseline`` (method labels), largest change first;
    ``compared``: samples both stored; ``unmatched``: samples only one stored."""

    baseline: str
    other: str
    dataset: str
    metric: str
    compared: int
    unmatched: int
    samples: Sequence[SampleDifference]

    @property
    def shown(self) -> Sequence[SampleDifference]:
        return self.samples[:SHOWN]

    @property
    def more(self) -> int:
        """Differences beyond the :data:`SHOWN` listed."""
        return max(0, len(self.samples) - SHOWN)

    @property
    def title(self) -> str:
        return f"{self.other} against {self.baseline}"

    def headline(self) -> str:
        """``3 of 40 samples differ in IoU (by more than 0.001, or in failing)``."""
        unmatched = f"; {self.unmatched} stored by one run only" if self.unmatched else ""
        return (
            f"{len(self.samples)} of {self.compared} samples differ in {self.metric} (by more "
            f"than {EPSILON:g}, or in failing){unmatched}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As ``metrics.json`` lists it: the :data:`SHOWN` largest, and how many more."""
        return {
            "baseline": self.baseline,
            "method": self.other,
            "dataset": self.dataset,
            "metric": self.metric,
            "epsilon": EPSILON,
            "compared": self.compared,
            "unmatched": self.unmatched,
            "differing": len(self.samples),
            "samples": [s.to_dict() for s in self.shown],
            "more": self.more,
        }


def compare_samples(baseline: MergedRuns[Any], other: MergedRuns[Any]) -> Differences:
    """Where ``other``'s samples differ from the same samples of ``baseline``."""
    before, after = baseline.sample_figures(), other.sample_figures()
    samples = []
    for sample_id in sorted(before.keys() & after.keys()):
        (b, b_failed), (a, a_failed) = before[sample_id], after[sample_id]
        if abs(a - b) > EPSILON or a_failed != b_failed:
            samples.append(SampleDifference(sample_id, b, a, b_failed, a_failed))
    samples.sort(key=lambda s: -abs(s.delta))  # stable: ids in order within one size
    return Differences(
        baseline=baseline.label,
        other=other.label,
        dataset=baseline.dataset,
        metric=baseline.sample_metric,
        compared=len(before.keys() & after.keys()),
        unmatched=len(before.keys() ^ after.keys()),
        samples=samples,
    )


def sample_differences(methods: Sequence[MergedRuns[Any]]) -> list[Differences]:
    """Per dataset, each later method against the first (the baseline)."""
    first: dict[str, MergedRuns[Any]] = {}
    found = []
    for m in methods:
        if m.dataset in first:
            found.append(compare_samples(first[m.dataset], m))
        else:
            first[m.dataset] = m
    return found


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


GALLERY_DIR = "gallery"
HISTOGRAM = "iou_hist.png"
GALLERY_SIDE = 384
GALLERY_NAME = re.compile(r"^\d+-\d+-.+\.png$")


def legend_label(method: Method) -> str:
    """``label: 6/200 (3%)``: the samples drawn, out of the whole split(s) they come from."""
    return f"{method.label}: {method.overall_coverage().text}"


def write_histogram(methods: Sequence[Method], path: Path) -> Path | None:
    if not any(m.results for m in methods):
        return None
    # The object API (no pyplot) draws with Agg without touching global backend state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6, 3.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    bins = np.linspace(0.0, 1.0, 21).tolist()
    for m in methods:
        ious = [r.iou for r in m.results]
        ax.hist(ious, bins=bins, histtype="step", linewidth=1.5, label=legend_label(m))
    ax.set_xlabel("IoU")
    ax.set_ylabel("samples")
    ax.set_xlim(0, 1)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="upper center")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    atomic_write_bytes(path, png.getvalue())
    return path


@dataclass(frozen=True)
class GalleryItem:
    method: Method
    result: SampleResult
    path: Path


def worst_samples(results: Sequence[SampleResult], count: int) -> list[SampleResult]:
    """The ``count`` lowest-IoU samples (ties: larger union first, then id)."""
    ranked = sorted(results, key=lambda r: (r.iou, -r.union, r.id))
    return [r for r in ranked if r.iou < 1.0][:count]


def write_gallery(methods: Sequence[Method], gallery_dir: Path, count: int) -> list[GalleryItem]:
    # A regenerated report must not show an earlier report's worst samples.
    for old in gallery_dir.glob("*.png") if gallery_dir.is_dir() else ():
        if GALLERY_NAME.match(old.name):
            old.unlink()
    items = []
    for mi, m in enumerate(methods):
        for rank, r in enumerate(worst_samples(m.results, count), start=1):
            name = f"{mi + 1}-{rank:02d}-{job_dir_name(r.id)}.png"
            try:
                panel = render_comparison(r)
            except ImageLoadError as e:
                logger.warning("gallery: skipped %s: %s", r.id, e)
                continue
            gallery_dir.mkdir(parents=True, exist_ok=True)
            path = gallery_dir / name
            write_png(path, panel)
            items.append(GalleryItem(m, r, path))
    return items


def _tint(
    image: RGBImage, mask: np.ndarray, color: tuple[int, int, int], alpha: float = 0.5
) -> RGBImage:
    out = image.astype(np.float32)
    out[mask] = (1 - alpha) * out[mask] + alpha * np.asarray(color, dtype=np.float32)
    edges = mask ^ cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    out[edges] = color
    return out.astype(np.uint8)


def render_comparison(result: SampleResult, side: int = GALLERY_SIDE) -> RGBImage:
    """The prediction (red) beside the ground truth (green; ignore region grey)."""
    image = load_image(result.image_path)
    size = (image.shape[0], image.shape[1])
    scale = side / max(size)
    h, w = max(1, round(size[0] * scale)), max(1, round(size[1] * scale))
    # Tiny images are enlarged too, so every panel is readable at the same size.
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST
    small: RGBImage = np.ascontiguousarray(
        cv2.resize(image, (w, h), interpolation=interpolation), dtype=np.uint8
    )

    def fit(rle: dict[str, Any] | None) -> np.ndarray:
        mask = np.zeros(size, dtype=bool) if rle is None else decode_rle(rle)
        if mask.shape != size:
            return np.zeros((h, w), dtype=bool)
        return cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0

    pred, gt, ignore = fit(result.prediction), fit(result.ground_truth), fit(result.ignore)
    left = _tint(small, pred, (230, 40, 40))
    right = _tint(_tint(small, ignore, (128, 128, 128), 0.7), gt, (40, 200, 40))
    gap = np.full((h, 8, 3), 255, dtype=np.uint8)
    body = np.concatenate([left, gap, right], axis=1)
    lines = [f"{result.id}  IoU {result.iou:.3f}  status {result.status}"]
    # OpenCV's Hershey fonts draw ASCII only.
    query = result.query.encode("ascii", "replace").decode()
    lines += textwrap.wrap(query, width=max(20, body.shape[1] // 9))[:3]
    header = np.full((18 * len(lines) + 8, body.shape[1], 3), 255, dtype=np.uint8)
    font = cv2.FONT_HERSHEY_SIMPLEX
    for i, text in enumerate(lines):
        cv2.putText(header, text, (4, 18 * (i + 1)), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    return np.ascontiguousarray(np.concatenate([header, body], axis=0))


IMAGE_INTRO = (
    "IoU per sample on the union of predicted masks (ignore pixels excluded; 1.0 when "
    "prediction and target are both empty); gIoU = mean IoU, cIoU = ΣI / ΣU. "
    "Failed samples count as empty predictions."
)


def report_runs(run_dirs: Sequence[Path], out_dir: Path, *, gallery_size: int = 6) -> ReportFiles:
    """Write the report of ``run_dirs`` (image or video runs, not both) to ``out_dir``."""
    kind = runs_kind(run_dirs)
    methods = load_methods(run_dirs, kind)
    make_report_dir(out_dir)
    comparisons = compare_with_published(methods, video=kind == VIDEO)
    warning = video_warning(comparisons) if kind == VIDEO else partial_warning(methods)
    differences = sample_differences(methods)
    metrics_path = write_metrics(
        out_dir,
        published=[r for d in dict.fromkeys(m.dataset for m in methods) for r in for_dataset(d)],
        comparisons=comparisons,
        warning=warning,
        methods=methods,
        differences=differences,
        kind=VIDEO if kind == VIDEO else None,
    )
    differing = [line for d in differences for line in difference_summary(d)]
    by_dataset = {m.dataset: [n for n in methods if n.dataset == m.dataset] for m in methods}
    if kind == VIDEO:
        sections = [line for d, ms in by_dataset.items() for line in _video_section(d, ms)]
        sections += difference_lines(differences, cell)
        report = write_markdown(
            out_dir, "sam3-agent video evaluation report", VIDEO_INTRO, methods, sections, cell
        )
        summary = [line for m in methods for line in _video_summary(m)]
        summary += [comparison_line(c, "beside") for c in comparisons] + differing
        return ReportFiles(metrics_path, report, methods, comparisons, warning, summary)
    histogram = write_histogram(methods, out_dir / HISTOGRAM)
    gallery = write_gallery(methods, out_dir / GALLERY_DIR, gallery_size)
    sections = [
        line for d, ms in by_dataset.items() for line in _dataset_section(d, ms, gallery, out_dir)
    ]
    if histogram is not None:
        rel = histogram.relative_to(out_dir).as_posix()
        sections += ["## IoU distribution", "", f"![IoU histogram]({rel})", ""]
    sections += difference_lines(differences)
    report = write_markdown(out_dir, "sam3-agent evaluation report", IMAGE_INTRO, methods, sections)
    summary = [
        f"{m.label}: {o.count} samples, gIoU {pct(o.giou)}, cIoU {pct(o.ciou)}, failed {o.failed}"
        for m in methods
        for o in [m.metrics.overall]
    ]
    summary += [comparison_line(c, "against") for c in comparisons] + differing
    pictures = [g.path for g in gallery]
    return ReportFiles(
        metrics_path, report, methods, comparisons, warning, summary, histogram, pictures
    )


def _main_columns(dataset: str, methods: Sequence[Method]) -> list[tuple[str, str, str | None]]:
    """``(column group title, split, tag)`` in paper order."""
    columns: list[tuple[str, str, str | None]] = []
    for split in ordered_splits({s for m in methods for s in m.metrics.splits}):
        # As in the LISA paper: ReasonSeg val overall only, test as short / long / overall.
        if dataset == "reasonseg" and split != "val":
            tags = {t for m in methods for t in m.metrics.split_tags.get(split, {})}
            for tag in ("short", "long"):
                if tag in tags:
                    columns.append((f"{split} {tag}", split, tag))
            columns.append((f"{split} overall" if tags else split, split, None))
        else:
            columns.append((split, split, None))
    return columns


def _dataset_section(
    dataset: str, methods: Sequence[Method], gallery: Sequence[GalleryItem], out_dir: Path
) -> list[str]:
    grefcoco = dataset == "grefcoco"
    lines = [f"## {dataset_title(dataset)}", ""]
    columns = _main_columns(dataset, methods)
    header = ["method"]
    for name, _, _ in columns:
        header += [f"{name} gIoU", f"{name} cIoU"]
        if grefcoco:
            header += [f"{name} N-acc", f"{name} T-acc"]
    published = _published_rows(dataset, columns, grefcoco)
    # Published figures cover whole splits: a run beside them says how much of each it scored.
    if published:
        header.append("samples scored")
    rows = []
    for m in methods:
        row = [m.label]
        for _, split, tag in columns:
            s = m.summary(split, tag)
            row += [pct(s.giou if s else None), pct(s.ciou if s else None)]
            if grefcoco:
                row += [pct(s.n_acc if s else None), pct(s.t_acc if s else None)]
        if published:
            row.append("; ".join(f"{split} {m.coverage(split).text}" for split in m.splits()))
        rows.append(row)
    warning = partial_warning(methods)
    if warning:
        lines += [f"**Warning:** {warning}.", ""]
    lines += ["### gIoU / cIoU (%)", "", table(header, rows + published), ""]
    if published:
        sources = sorted({r.source for r in for_dataset(dataset)})
        lines += [f"Rows marked (published): {'; '.join(sources)}.", ""]
    comparisons = compare_with_published(methods)
    if comparisons:
        lines += ["### Against the published figures (same MLLM)", ""]
        lines += [comparison_table(comparisons, lambda r: r.model), ""]

    pr_header = ["method", "split", *(f"Pr@{t:g}" for t in PR_THRESHOLDS)]
    pr_rows = []
    for m in methods:
        for split in m.scored_splits():
            pr = m.metrics.splits[split].precision or {}
            pr_rows.append([m.label, split, *(pct(pr.get(t)) for t in PR_THRESHOLDS)])
    # ReLA's Pr@ counts target samples only: an empty answer to a no-target sample is no hit.
    scope = "target samples" if grefcoco else "samples"
    lines += [f"### Precision (% of {scope} with IoU at or above the threshold)", ""]
    lines += [table(pr_header, pr_rows), ""]

    run_rows = [
        run_cells(m.label, m.usage(), agent=m.config.get("mode") != "sam3-only") for m in methods
    ]
    lines += ["### Run", "", table(RUN_HEADER, run_rows), ""]
    lines += failed_lines([(m.label, i, msg) for m in methods for i, msg in m.metrics.failed])

    items = [g for g in gallery if g.method.dataset == dataset]
    if items:
        lines += ["### Worst samples (prediction | ground truth)", ""]
        for g in items:
            rel = g.path.relative_to(out_dir).as_posix()
            query = g.result.query.replace("|", "\\|").replace("\n", " ")
            caption = f"**{g.result.id}** ({g.method.label}), IoU {g.result.iou:.3f}: “{query}”"
            lines += [caption, "", f"![{g.result.id}]({rel})", ""]
    return lines


def _published_rows(
    dataset: str, columns: Sequence[tuple[str, str, str | None]], grefcoco: bool
) -> list[list[str]]:
    """Rows of published figures in the main table's columns; only rows with a figure there."""
    by_model: dict[str, dict[tuple[str, str | None, str], float]] = {}
    for r in for_dataset(dataset):
        by_model.setdefault(r.label, {})[(r.split, r.tag, r.metric)] = r.value
    rows = []
    for label, cells in by_model.items():
        row = [label]
        for _, split, tag in columns:
            for metric in ("gIoU", "cIoU"):
                value = cells.get((split, tag, metric))
                row.append("–" if value is None else f"{value:.1f}")
            if grefcoco:
                row += ["–", "–"]
        if any(c != "–" for c in row[1:]):
            rows.append([*row, "whole split"])
    return rows


def partial_warning(methods: Sequence[Method]) -> str | None:
    """The coverage warning of the runs beside published figures (None: nothing to say)."""
    compared = [
        (m, s)
        for m in methods
        for s in m.splits()
        if s in {r.split for r in for_dataset(m.dataset)}
    ]
    return partial_text((m.label, s, m.coverage(s)) for m, s in compared)


def compare_with_published(
    methods: Sequence[Method | VideoMethod], *, video: bool = False
) -> list[Compared]:
    """Every published figure whose MLLM, dataset and split a method's run matches; for
    ``video`` every one of the dataset (on each of the run's splits where none is stated)."""
    comparisons = []
    for m in methods:
        if m.config.get("mode") == "sam3-only":
            continue
        for r in for_dataset(m.dataset):
            if not video and not matches(r, m.config.get("model")):
                continue
            for split in [r.split] if r.split else list(m.scored_splits()):
                summary = m.summary(split, r.tag)
                value = None if summary is None else summary.figure(r.metric)
                if value is not None:
                    coverage = m.coverage(split, r.tag)
                    comparisons.append(Compared(m.label, split, r, 100 * value, coverage, video))
    return comparisons


OVERALL = "overall"
"""The subset column's name for a split's overall figures."""

VIDEO_INTRO = (
    "Per annotated frame, J is the region IoU and F the contour F-measure as the DAVIS "
    "benchmark defines them (1.0 when prediction and target are both empty); a sample "
    "scores their means over its frames, a group the mean over its samples, and "
    "J&F = (J + F) / 2. The prediction at a frame is the union of the selected tracks. "
    "Failed samples count as empty predictions."
)


def video_warning(comparisons: Sequence[Compared]) -> str | None:
    """The coverage warning of the compared video runs (None: nothing to say)."""
    return partial_text(dict.fromkeys((c.method, c.split, c.coverage) for c in comparisons))


def _video_summary(m: VideoMethod) -> list[str]:
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


def _video_section(dataset: str, methods: Sequence[VideoMethod]) -> list[str]:
    info = VIDEO_DATASETS.get(dataset)
    lines = [f"## {dataset_title(dataset)}", ""]
    published = []
    for r in for_dataset(dataset):
        cells = {"J": "–", "F": "–", "J&F": "–"}
        cells[r.metric] = f"{r.value:.1f}"
        split = r.split or "not stated"
        published.append([r.label, split, r.tag or OVERALL, "–", *cells.values(), "whole split"])
    comparisons = compare_with_published(methods, video=True)
    warning = video_warning(comparisons)
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
        sources = sorted({r.source for r in for_dataset(dataset)})
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
        cost = run_cells(cell(m.label), u)
        run_rows.append([*cost, "–" if frames is None else f"{frames:.1f}"])
    header = [*RUN_HEADER, "frames scored / sample"]
    lines += ["### Run", "", table(header, run_rows), ""]
    failed = [(m.label, i, msg) for m in methods for b in m.metrics.values() for i, msg in b.failed]
    return lines + failed_lines(failed, cell)
