"""An image report's figures: the IoU histogram and the gallery of the worst samples."""

from __future__ import annotations

import io
import logging
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from sam3_agent.runs.evaluation.methods import Method
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import job_dir_name
from sam3_agent.values.errors import ImageLoadError
from sam3_agent.values.files import atomic_write_bytes, write_png
from sam3_agent.values.images import RGBImage, load_image
from sam3_agent.values.rle import decode_rle

logger = logging.getLogger(__name__)

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
