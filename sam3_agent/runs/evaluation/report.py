"""Reports over one or more run directories: ``metrics.json``, ``report.md`` and figures.

Run directories whose settings differ only in split or shard are merged into one *method*
(one row of the paper-style tables): shards of one split, or the val and test runs of one
model. Different models or modes become different rows; different datasets get their own
sections.
"""

from __future__ import annotations

import io
import json
import logging
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from sam3_agent.runs.evaluation.metrics import PR_THRESHOLDS, Breakdown, Summary, breakdown
from sam3_agent.runs.evaluation.published import PublishedResult, for_dataset, matches
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import job_dir_name, reading
from sam3_agent.values.detections import decode_rle
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.files import atomic_write_bytes, utf8, write_png
from sam3_agent.values.images import RGBImage, load_image
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

MERGED_KEYS = ("split", "shard", "preset")
"""Settings that may differ between run directories merged into one method (the val and
test presets of one model are one row)."""
SPLIT_ORDER = ("val", "test", "testA", "testB", "train")
DATASET_TITLES = {
    "reasonseg": "ReasonSeg",
    "refcoco": "RefCOCO",
    "refcoco+": "RefCOCO+",
    "refcocog": "RefCOCOg",
    "grefcoco": "gRefCOCO",
}
GALLERY_DIR = "gallery"
HISTOGRAM = "iou_hist.png"
GALLERY_SIDE = 384
GALLERY_NAME = re.compile(r"^\d+-\d+-.+\.png$")


@dataclass
class Method:
    """The merged results of run directories that share their settings but split/shard."""

    label: str
    config: dict[str, Any]
    run_dirs: list[Path]
    results: list[SampleResult]
    planned: int | None
    metrics: Breakdown = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = breakdown(r.scored() for r in self.results)

    @property
    def dataset(self) -> str:
        return str(self.config.get("dataset", "?"))

    def usage(self) -> dict[str, Any]:
        n = len(self.results)
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in self.results)
        return {
            "samples": n,
            "planned": self.planned,
            "failed": sum(r.failed for r in self.results),
            "infrastructure_errors": sum(r.infra_error for r in self.results),
            "mean_rounds": sum(r.rounds for r in self.results) / n if n else None,
            "prompt_tokens": sum(r.prompt_tokens for r in self.results),
            "completion_tokens": sum(r.completion_tokens for r in self.results),
            "tokens_per_sample": tokens / n if n else None,
            "mean_time_s": sum(r.time_s for r in self.results) / n if n else None,
        }


def _label(config: dict[str, Any]) -> str:
    if config.get("mode") == "sam3-only":
        return f"SAM 3 only ({config.get('sam3')})"
    return f"{config.get('model')} + SAM 3 agent"


def load_methods(run_dirs: Sequence[Path]) -> list[Method]:
    """Read run directories and merge them into methods (see the module docstring).

    A sample id stored in two merged directories is counted once (the first directory
    given wins) and a warning is logged.

    Raises:
        UserError: no run directory given, or one is not a run directory.
    """
    if not run_dirs:
        raise UserError("give at least one run directory")
    groups: dict[str, dict[str, Any]] = {}
    for run_dir in run_dirs:
        with reading(run_dir, SampleResult.from_json) as store:
            config = store.config() or {}
            results = store.results()
            planned = store.planned()
        key_config = {k: v for k, v in config.items() if k not in MERGED_KEYS}
        key = json.dumps(key_config, sort_keys=True)
        group = groups.setdefault(
            key, {"config": key_config, "dirs": [], "results": {}, "planned": 0}
        )
        group["dirs"].append(run_dir)
        group["planned"] = (
            None if planned is None or group["planned"] is None else (group["planned"] + planned)
        )
        for r in results:
            if r.id in group["results"]:
                logger.warning(
                    "sample %s is stored in several run directories; kept the first", r.id
                )
                continue
            group["results"][r.id] = r
    methods = []
    labels: dict[str, int] = {}
    for group in groups.values():
        # Rows of one table need distinct labels; other datasets' tables may reuse them.
        label = _label(group["config"])
        key = f"{group['config'].get('dataset')}\0{label}"
        labels[key] = labels.get(key, 0) + 1
        if labels[key] > 1:
            label = f"{label} [{labels[key]}]"
        methods.append(
            Method(
                label=label,
                config=group["config"],
                run_dirs=group["dirs"],
                results=sorted(group["results"].values(), key=lambda r: r.id),
                planned=group["planned"],
            )
        )
    return methods


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    metrics_json: Path
    report_md: Path
    histogram: Path | None
    gallery: list[Path]
    methods: list[Method]


def write_report(run_dirs: Sequence[Path], out_dir: Path, *, gallery_size: int = 6) -> ReportFiles:
    """Write ``metrics.json``, ``report.md``, the IoU histogram and the worst-sample gallery.

    Raises:
        UserError: see :func:`load_methods`; ``out_dir`` cannot be written.
    """
    methods = load_methods(run_dirs)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create report directory {out_dir}: {e}") from e
    datasets = list(dict.fromkeys(m.dataset for m in methods))
    metrics_doc = {
        "version": __version__,
        "published": [
            {
                "model": r.model,
                "dataset": r.dataset,
                "split": r.split,
                "tag": r.tag,
                "metric": r.metric,
                "value": r.value,
                "source": r.source,
            }
            for d in datasets
            for r in for_dataset(d)
        ],
        "compared_with_published": [c.to_dict() for c in compare_with_published(methods)],
        "methods": [
            {
                "label": m.label,
                "config": m.config,
                "run_dirs": [str(d) for d in m.run_dirs],
                "usage": m.usage(),
                "metrics": m.metrics.to_dict(),
            }
            for m in methods
        ],
    }
    metrics_path = out_dir / "metrics.json"
    atomic_write_bytes(metrics_path, json.dumps(metrics_doc, indent=2).encode())
    histogram = _write_histogram(methods, out_dir / HISTOGRAM)
    gallery = _write_gallery(methods, out_dir / GALLERY_DIR, gallery_size)
    report_path = out_dir / "report.md"
    markdown = render_markdown(methods, histogram=histogram, gallery=gallery, out_dir=out_dir)
    atomic_write_bytes(report_path, utf8(markdown))
    logger.info("report written to %s", report_path)
    return ReportFiles(metrics_path, report_path, histogram, [g.path for g in gallery], methods)


# --------------------------------------------------------------------------- markdown


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _ordered_splits(methods: Sequence[Method]) -> list[str]:
    splits = {s for m in methods for s in m.metrics.splits}
    known = [s for s in SPLIT_ORDER if s in splits]
    return known + sorted(splits - set(known))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _main_columns(dataset: str, methods: Sequence[Method]) -> list[tuple[str, str, str | None]]:
    """``(column group title, split, tag)`` in paper order."""
    columns: list[tuple[str, str, str | None]] = []
    for split in _ordered_splits(methods):
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


def _summary_of(method: Method, split: str, tag: str | None) -> Summary | None:
    if tag is None:
        return method.metrics.splits.get(split)
    return method.metrics.split_tags.get(split, {}).get(tag)


def _dataset_section(
    dataset: str, methods: Sequence[Method], gallery: Sequence[_GalleryItem], out_dir: Path
) -> list[str]:
    title = DATASET_TITLES.get(dataset, dataset)
    grefcoco = dataset == "grefcoco"
    lines = [f"## {title}", ""]
    columns = _main_columns(dataset, methods)
    header = ["method"]
    for name, _, _ in columns:
        header += [f"{name} gIoU", f"{name} cIoU"]
        if grefcoco:
            header += [f"{name} N-acc", f"{name} T-acc"]
    rows = []
    for m in methods:
        row = [m.label]
        for _, split, tag in columns:
            s = _summary_of(m, split, tag)
            row += [_pct(s.giou if s else None), _pct(s.ciou if s else None)]
            if grefcoco:
                row += [_pct(s.n_acc if s else None), _pct(s.t_acc if s else None)]
        rows.append(row)
    published = _published_rows(dataset, columns, grefcoco)
    lines += ["### gIoU / cIoU (%)", "", _table(header, rows + published), ""]
    if published:
        sources = sorted({r.source for r in for_dataset(dataset)})
        lines += [f"Rows marked (published): {'; '.join(sources)}.", ""]
    comparisons = compare_with_published(methods)
    if comparisons:
        lines += ["### Against the published figures (same MLLM)", ""]
        lines += [
            _table(
                ["method", "published", "split", "metric", "ours", "published", "difference"],
                [
                    [
                        c.method,
                        c.published.model,
                        c.published.split,
                        c.published.metric,
                        f"{c.ours:.1f}",
                        f"{c.published.value:.1f}",
                        f"{c.difference:+.1f}",
                    ]
                    for c in comparisons
                ],
            ),
            "",
        ]

    pr_header = ["method", "split", *(f"Pr@{t:g}" for t in PR_THRESHOLDS)]
    pr_rows = []
    for m in methods:
        for split in _ordered_splits([m]):
            pr = m.metrics.splits[split].precision or {}
            pr_rows.append([m.label, split, *(_pct(pr.get(t)) for t in PR_THRESHOLDS)])
    # ReLA's Pr@ counts target samples only: an empty answer to a no-target sample is no hit.
    scope = "target samples" if grefcoco else "samples"
    lines += [f"### Precision (% of {scope} with IoU at or above the threshold)", ""]
    lines += [_table(pr_header, pr_rows), ""]

    run_header = ["method", "samples", "failed", "mean rounds", "tokens / sample", "s / sample"]
    run_rows = []
    for m in methods:
        u = m.usage()
        sam3_only = m.config.get("mode") == "sam3-only"
        stored = str(u["samples"])
        if u["planned"] not in (None, u["samples"]):
            stored += f" of {u['planned']}"
        run_rows.append(
            [
                m.label,
                stored,
                str(u["failed"]),
                "–" if u["mean_rounds"] is None or sam3_only else f"{u['mean_rounds']:.2f}",
                "–"
                if u["tokens_per_sample"] is None or sam3_only
                else f"{u['tokens_per_sample']:.0f}",
                "–" if u["mean_time_s"] is None else f"{u['mean_time_s']:.2f}",
            ]
        )
    lines += ["### Run", "", _table(run_header, run_rows), ""]

    failed = [(m.label, i, msg) for m in methods for i, msg in m.metrics.failed]
    if failed:
        lines += ["### Failed samples (scored as empty predictions)", ""]
        lines += [f"- {label}: `{i}`: {msg}" for label, i, msg in failed[:50]]
        if len(failed) > 50:
            lines.append(f"- ... and {len(failed) - 50} more (see metrics.json)")
        lines.append("")

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
    """Rows of published figures for the main table, in its columns; only rows with at
    least one figure in those columns."""
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
        if any(cell != "–" for cell in row[1:]):
            rows.append(row)
    return rows


@dataclass(frozen=True)
class Comparison:
    """A run's figure beside the published one for the same MLLM, dataset and split.

    ``ours``, ``difference``: percentages (ours minus published).
    """

    method: str
    published: PublishedResult
    ours: float

    @property
    def difference(self) -> float:
        return self.ours - self.published.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "model": self.published.model,
            "dataset": self.published.dataset,
            "split": self.published.split,
            "metric": self.published.metric,
            "ours": round(self.ours, 2),
            "published": self.published.value,
            "difference": round(self.difference, 2),
            "source": self.published.source,
        }


def compare_with_published(methods: Sequence[Method]) -> list[Comparison]:
    """Every published figure whose MLLM, dataset and split a method's run matches."""
    comparisons = []
    for m in methods:
        if m.config.get("mode") == "sam3-only":
            continue
        for r in for_dataset(m.dataset):
            if not matches(r, m.config.get("model")):
                continue
            summary = _summary_of(m, r.split, r.tag)
            value = None
            if summary is not None:
                value = summary.giou if r.metric == "gIoU" else summary.ciou
            if value is not None:
                comparisons.append(Comparison(m.label, r, 100 * value))
    return comparisons


def render_markdown(
    methods: Sequence[Method],
    *,
    histogram: Path | None = None,
    gallery: Sequence[_GalleryItem] = (),
    out_dir: Path | None = None,
) -> str:
    """The report as Markdown: one section per dataset, tables in the paper's layout."""
    out_dir = out_dir or Path(".")
    lines = [
        "# sam3-agent evaluation report",
        "",
        f"sam3-agent {__version__}; {sum(len(m.run_dirs) for m in methods)} run "
        f"director{'y' if sum(len(m.run_dirs) for m in methods) == 1 else 'ies'}. "
        "IoU per sample on the union of predicted masks (ignore pixels excluded; 1.0 when "
        "prediction and target are both empty); gIoU = mean IoU, cIoU = ΣI / ΣU. "
        "Failed samples count as empty predictions.",
        "",
    ]
    for dataset in dict.fromkeys(m.dataset for m in methods):
        subset = [m for m in methods if m.dataset == dataset]
        lines += _dataset_section(dataset, subset, gallery, out_dir)
    if histogram is not None:
        rel = histogram.relative_to(out_dir).as_posix()
        lines += ["## IoU distribution", "", f"![IoU histogram]({rel})", ""]
    lines += ["## Runs", ""]
    for m in methods:
        settings = ", ".join(f"{k}={v}" for k, v in m.config.items() if k != "agent")
        lines.append(f"- **{m.label}**: {settings}; from {', '.join(str(d) for d in m.run_dirs)}")
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- figures


def _write_histogram(methods: Sequence[Method], path: Path) -> Path | None:
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
        ax.hist(ious, bins=bins, histtype="step", linewidth=1.5, label=f"{m.label} (n={len(ious)})")
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
class _GalleryItem:
    method: Method
    result: SampleResult
    path: Path


def worst_samples(results: Sequence[SampleResult], count: int) -> list[SampleResult]:
    """The ``count`` lowest-IoU samples (ties: larger union first, then id)."""
    ranked = sorted(results, key=lambda r: (r.iou, -r.union, r.id))
    return [r for r in ranked if r.iou < 1.0][:count]


def _write_gallery(methods: Sequence[Method], gallery_dir: Path, count: int) -> list[_GalleryItem]:
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
            items.append(_GalleryItem(m, r, path))
    return items


def _mask(rle: dict[str, Any] | None, size: tuple[int, int]) -> np.ndarray:
    return np.zeros(size, dtype=bool) if rle is None else decode_rle(rle)


def _tint(
    image: RGBImage, mask: np.ndarray, color: tuple[int, int, int], alpha: float = 0.5
) -> RGBImage:
    out = image.astype(np.float32)
    out[mask] = (1 - alpha) * out[mask] + alpha * np.asarray(color, dtype=np.float32)
    edges = mask ^ cv2.erode(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    out[edges] = color
    return out.astype(np.uint8)


def render_comparison(result: SampleResult, side: int = GALLERY_SIDE) -> RGBImage:
    """The prediction (red) beside the ground truth (green; ignore region grey).

    Raises:
        ImageLoadError: the sample's image cannot be read.
    """
    image = load_image(result.image_path)
    size = (image.shape[0], image.shape[1])
    scale = side / max(size)
    h, w = max(1, round(size[0] * scale)), max(1, round(size[1] * scale))
    # Tiny images are enlarged too, so every panel is readable at the same size.
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST
    small: RGBImage = np.ascontiguousarray(
        cv2.resize(image, (w, h), interpolation=interpolation), dtype=np.uint8
    )

    def fit(mask: np.ndarray) -> np.ndarray:
        if mask.shape != size:
            return np.zeros((h, w), dtype=bool)
        small_mask = cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST)
        return small_mask.astype(bool)

    pred = fit(_mask(result.prediction, size))
    gt = fit(_mask(result.ground_truth, size))
    ignore = fit(_mask(result.ignore, size))
    left = _tint(small, pred, (230, 40, 40))
    right = _tint(_tint(small, ignore, (128, 128, 128), 0.7), gt, (40, 200, 40))
    gap = np.full((h, 8, 3), 255, dtype=np.uint8)
    body = np.concatenate([left, gap, right], axis=1)
    lines = [f"{result.id}  IoU {result.iou:.3f}  status {result.status}"]
    # OpenCV's Hershey fonts draw ASCII only.
    query = result.query.encode("ascii", "replace").decode()
    lines += textwrap.wrap(query, width=max(20, body.shape[1] // 9))[:3]
    header = np.full((18 * len(lines) + 8, body.shape[1], 3), 255, dtype=np.uint8)
    for i, text in enumerate(lines):
        cv2.putText(
            header,
            text,
            (4, 18 * (i + 1)),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.45,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
    return np.ascontiguousarray(np.concatenate([header, body], axis=0))
