"""J (region similarity), F (contour accuracy) and J&F as the DAVIS benchmark defines them
(Perazzi et al., CVPR 2016, Section 3); pure, fractions in ``[0, 1]``, void pixels left out.
F matches contour pixels within ``ceil(0.008 · diagonal)`` pixels; as in DAVIS the image
border is no contour (a quirk kept so figures match the published ones)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from sam3_agent.runs.evaluation.metrics import outside_ignore, score_mask
from sam3_agent.runs.evaluation.samples import GroundTruth
from sam3_agent.values.detections import BoolArray

BOUND_TH = 0.008
"""DAVIS's contour tolerance: a fraction of the image diagonal."""


def region_similarity(pred: BoolArray, gt: BoolArray, void: BoolArray | None = None) -> float:
    """J of one frame: IoU of two ``(H, W)`` bool masks, void pixels left out; 1.0 when the
    union is empty."""
    return score_mask(pred, gt, void).iou


def boundary_map(mask: BoolArray) -> BoolArray:
    """The one-pixel contour of an ``(H, W)`` bool mask, as DAVIS's ``seg2bmap`` draws it: a
    pixel differing from its right, lower or lower-right neighbour, so the contour lies half a
    pixel towards the origin from the mask's edge."""
    seg = np.asarray(mask, dtype=bool)
    if seg.ndim != 2 or seg.size == 0:
        raise ValueError(f"a mask must be a non-empty (H, W) array, got shape {seg.shape}")
    here = seg[:-1, :-1]
    bmap = np.zeros_like(seg)
    bmap[:-1, :-1] = (here ^ seg[:-1, 1:]) | (here ^ seg[1:, :-1]) | (here ^ seg[1:, 1:])
    bmap[-1, :-1] = seg[-1, :-1] ^ seg[-1, 1:]
    bmap[:-1, -1] = seg[:-1, -1] ^ seg[1:, -1]
    return bmap


def boundary_radius(height: int, width: int, bound_th: float = BOUND_TH) -> int:
    """The matching radius in pixels: ``ceil(bound_th * diagonal)`` for ``bound_th < 1``,
    ``bound_th`` itself (a whole number of pixels) otherwise."""
    if not bound_th > 0:
        raise ValueError(f"bound_th must be positive, got {bound_th}")
    if bound_th >= 1:
        if bound_th != int(bound_th):
            raise ValueError(f"a bound_th >= 1 is a radius in pixels, got {bound_th}")
        return int(bound_th)
    # sqrt of the exact integer sum, as DAVIS's np.linalg.norm(shape) computes it, so the
    # ceiling lands on the same side.
    return math.ceil(bound_th * math.sqrt(height * height + width * width))


def _disk(radius: int) -> np.ndarray:
    """Pixels within Euclidean distance ``radius`` of the centre (skimage's ``disk``)."""
    offsets = np.arange(-radius, radius + 1)
    return (offsets[:, None] ** 2 + offsets[None, :] ** 2 <= radius * radius).astype(np.uint8)


def boundary_f(pred: BoolArray, gt: BoolArray, void: BoolArray | None = None) -> float:
    """F of one frame: the DAVIS contour F-measure of two ``(H, W)`` bool masks (1 when both
    contours are empty, 0 when one is)."""
    pred, gt = outside_ignore(pred, gt, void)
    pred_contour = boundary_map(pred)
    gt_contour = boundary_map(gt)
    n_pred = int(np.count_nonzero(pred_contour))
    n_gt = int(np.count_nonzero(gt_contour))
    if n_pred == 0 or n_gt == 0:
        return 1.0 if n_pred == n_gt else 0.0
    radius = boundary_radius(gt.shape[0], gt.shape[1])
    kernel = _disk(radius)
    # Only the box around both contours, grown by the radius, can hold a match: dilating
    # that crop gives the same counts as the whole frame at a fraction of the cost.
    rows = np.flatnonzero((pred_contour | gt_contour).any(axis=1))
    cols = np.flatnonzero((pred_contour | gt_contour).any(axis=0))
    box = (
        slice(max(rows[0] - radius, 0), rows[-1] + radius + 1),
        slice(max(cols[0] - radius, 0), cols[-1] + radius + 1),
    )
    pred_contour, gt_contour = pred_contour[box], gt_contour[box]
    # Dilation with a flat disk: a pixel is set when a contour pixel lies within the radius.
    # OpenCV's default border adds nothing outside the array, as a set dilation should.
    pred_near = cv2.dilate(pred_contour.astype(np.uint8), kernel).view(bool)
    gt_near = cv2.dilate(gt_contour.astype(np.uint8), kernel).view(bool)
    precision = np.count_nonzero(pred_contour & gt_near) / n_pred
    recall = np.count_nonzero(gt_contour & pred_near) / n_gt
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class FrameScore:
    """J and F of one annotated frame."""

    j: float
    f: float


def score_frame(pred: BoolArray | None, gt: GroundTruth) -> FrameScore:
    """J and F of one frame (``pred`` None: empty; ``gt.ignore``: the void pixels)."""
    mask = np.zeros_like(gt.mask, dtype=bool) if pred is None else pred
    j = region_similarity(mask, gt.mask, gt.ignore)
    return FrameScore(j=j, f=boundary_f(mask, gt.mask, gt.ignore))


@dataclass(frozen=True)
class VideoScore:
    """Mean J and mean F of one video (one object-expression) over its annotated frames."""

    j: float
    f: float
    frames: int
    """Annotated frames scored."""

    @property
    def jf(self) -> float:
        return (self.j + self.f) / 2


class VideoAccumulator:
    """J and F of one video accumulated frame by frame, so no frame is kept. A frame without
    ground truth (``gt`` None) is not scored, as the benchmarks score annotated frames only."""

    def __init__(self) -> None:
        self.frames = 0
        self._j: list[float] = []
        self._f: list[float] = []

    def update(self, pred: BoolArray | None, gt: GroundTruth | None) -> FrameScore | None:
        """Score one frame (``pred`` None: nothing predicted); None when it has no ground truth."""
        if gt is None:
            return None
        score = score_frame(pred, gt)
        self.frames += 1
        self._j.append(score.j)
        self._f.append(score.f)
        return score

    def result(self) -> VideoScore:
        if not self.frames:
            raise ValueError("no annotated frame was scored")
        # fsum: the mean does not depend on rounding along the way.
        return VideoScore(
            j=math.fsum(self._j) / self.frames,
            f=math.fsum(self._f) / self.frames,
            frames=self.frames,
        )


@dataclass(frozen=True)
class ScoredVideo:
    """One finished video sample; a failed one scores as empty on every frame."""

    id: str
    tags: tuple[str, ...]
    score: VideoScore
    failed: bool = False
    failure: str | None = None


@dataclass(frozen=True)
class VideoSummary:
    """Means over a group of videos, fractions in ``[0, 1]``; None for an empty group."""

    count: int
    j: float | None
    f: float | None
    failed: int

    @property
    def jf(self) -> float | None:
        return None if self.j is None or self.f is None else (self.j + self.f) / 2

    def figure(self, metric: str) -> float | None:
        """``J``, ``F`` or ``J&F`` by name (None: an empty group or another metric)."""
        return {"J": self.j, "F": self.f, "J&F": self.jf}.get(metric)

    def to_dict(self) -> dict[str, Any]:
        figures = {m: self.figure(m) for m in ("J", "F", "J&F")}
        return {"count": self.count, **figures, "failed": self.failed}


def summarize(videos: Iterable[ScoredVideo]) -> VideoSummary:
    """Mean J and mean F over ``videos``, every video weighing the same."""
    items = list(videos)
    n = len(items)
    return VideoSummary(
        count=n,
        j=math.fsum(v.score.j for v in items) / n if n else None,
        f=math.fsum(v.score.f for v in items) / n if n else None,
        failed=sum(v.failed for v in items),
    )


@dataclass(frozen=True)
class VideoBreakdown:
    """Metrics overall and per subset tag."""

    overall: VideoSummary
    tags: dict[str, VideoSummary]
    overall_from: tuple[str, ...] | None = None
    """The tags whose means ``overall`` averages (ReVOS), or None: the mean over all videos."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """``(sample id, failure message)`` of every failed sample, sorted by id."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_dict(),
            "overall_from": list(self.overall_from) if self.overall_from else None,
            "tags": {t: s.to_dict() for t, s in self.tags.items()},
            "failed": [{"id": i, "failure": msg} for i, msg in self.failed],
        }


def breakdown(
    videos: Iterable[ScoredVideo], *, overall_from: Sequence[str] | None = None
) -> VideoBreakdown:
    """Summaries overall and per tag (keys sorted); with ``overall_from`` overall is the mean
    of those tags' means (ReVOS's official "overall"), else the mean over every video."""
    items = sorted(videos, key=lambda v: v.id)
    by_tag: dict[str, list[ScoredVideo]] = {}
    for v in items:
        for tag in v.tags:
            by_tag.setdefault(tag, []).append(v)
    tags = {k: summarize(v) for k, v in sorted(by_tag.items())}
    if overall_from:
        parts = [tags[t] for t in overall_from if t in tags]
        members = {v.id for t in overall_from for v in by_tag.get(t, [])}
        overall = VideoSummary(
            count=len(members),
            j=math.fsum(p.j for p in parts if p.j is not None) / len(parts) if parts else None,
            f=math.fsum(p.f for p in parts if p.f is not None) / len(parts) if parts else None,
            failed=sum(v.failed for v in items if v.id in members),
        )
    else:
        overall = summarize(items)
    return VideoBreakdown(
        overall=overall,
        tags=tags,
        overall_from=tuple(overall_from) if overall_from else None,
        failed=[(v.id, v.failure or "failed") for v in items if v.failed],
    )
