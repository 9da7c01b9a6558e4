"""Image segmentation metrics, pure. Per sample, on the union of the predicted masks with
ignore pixels excluded: I, U in pixels, IoU = I / U (1.0 when both are empty). Over samples:
gIoU = mean IoU; cIoU = ΣI / ΣU (None when ΣU is 0); Pr@t = share of *target* samples with
IoU >= t, as LAVT and ReLA compute it (an empty answer to a no-target sample would be a hit
at every threshold); N-acc = share of no-target samples answered with no mask, T-acc = share
of target samples answered with one (gRefCOCO). A failed sample scores as an empty prediction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent.values.detections import BoolArray

PR_THRESHOLDS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class SampleScore:
    """Pixel counts of one prediction against its ground truth, outside the ignore region
    except ``pred_area`` (> 0 means "answered with a mask", what N-acc / T-acc count)."""

    intersection: int
    union: int
    pred_area: int
    gt_area: int

    @property
    def iou(self) -> float:
        """I / U, or 1.0 when both prediction and target are empty (U == 0)."""
        return self.intersection / self.union if self.union else 1.0


def outside_ignore(
    pred: BoolArray, gt: BoolArray, ignore: BoolArray | None
) -> tuple[BoolArray, BoolArray]:
    """Both masks as bool arrays of one ``(H, W)`` shape, ignore (void) pixels cleared."""
    pred, gt = np.asarray(pred, dtype=bool), np.asarray(gt, dtype=bool)
    if gt.ndim != 2 or gt.size == 0:
        raise ValueError(f"a mask must be a non-empty (H, W) array, got shape {gt.shape}")
    if pred.shape != gt.shape or (ignore is not None and ignore.shape != gt.shape):
        shapes = f"prediction {pred.shape}, ground truth {gt.shape}"
        if ignore is not None:
            shapes += f", ignore {ignore.shape}"
        raise ValueError(f"mask shapes differ: {shapes}")
    if ignore is None:
        return pred, gt
    valid = ~np.asarray(ignore, dtype=bool)
    return pred & valid, gt & valid


def score_mask(pred: BoolArray, gt: BoolArray, ignore: BoolArray | None = None) -> SampleScore:
    """Score an ``(H, W)`` bool prediction against an ``(H, W)`` bool target."""
    pred_v, gt_v = outside_ignore(pred, gt, ignore)
    inter = int(np.count_nonzero(pred_v & gt_v))
    gt_area = int(np.count_nonzero(gt_v))
    union = int(np.count_nonzero(pred_v)) + gt_area - inter
    return SampleScore(inter, union, int(np.count_nonzero(pred)), gt_area)


@dataclass(frozen=True)
class ScoredSample:
    """What the summary needs of one finished sample."""

    id: str
    split: str
    tags: tuple[str, ...]
    no_target: bool
    score: SampleScore
    failed: bool = False
    failure: str | None = None

    @property
    def iou(self) -> float:
        return self.score.iou


@dataclass(frozen=True)
class Summary:
    """Metrics over one group of samples. Shares are in ``[0, 1]``; None where undefined."""

    count: int
    giou: float | None
    ciou: float | None
    precision: dict[float, float] | None
    """Pr@t keyed by threshold t, over the target samples; None when the group has none."""
    n_acc: float | None
    """None when the group has no no-target sample."""
    t_acc: float | None
    """None when the group has no target sample."""
    no_target: int
    failed: int
    intersection: int
    union: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "gIoU": self.giou,
            "cIoU": self.ciou,
            "precision": (
                None
                if self.precision is None
                else {f"Pr@{t:g}": v for t, v in self.precision.items()}
            ),
            "N-acc": self.n_acc,
            "T-acc": self.t_acc,
            "no_target": self.no_target,
            "failed": self.failed,
            "sum_I": self.intersection,
            "sum_U": self.union,
        }

    def figure(self, metric: str) -> float | None:
        """``gIoU`` or ``cIoU`` by name (None: undefined or another metric)."""
        return {"gIoU": self.giou, "cIoU": self.ciou}.get(metric)


def summarize(
    samples: Iterable[ScoredSample], thresholds: Sequence[float] = PR_THRESHOLDS
) -> Summary:
    """Metrics of a group of samples (order does not matter: sums are exact)."""
    items = list(samples)
    n = len(items)
    ious = [s.iou for s in items]
    sum_i = sum(s.score.intersection for s in items)
    sum_u = sum(s.score.union for s in items)
    no_target = [s for s in items if s.no_target]
    target = [s for s in items if not s.no_target]
    return Summary(
        count=n,
        # fsum is correctly rounded, so the mean does not depend on the order of samples.
        giou=math.fsum(ious) / n if n else None,
        ciou=sum_i / sum_u if sum_u else None,
        precision=(
            {t: sum(s.iou >= t for s in target) / len(target) for t in thresholds}
            if target
            else None
        ),
        n_acc=(
            sum(s.score.pred_area == 0 for s in no_target) / len(no_target) if no_target else None
        ),
        t_acc=sum(s.score.pred_area > 0 for s in target) / len(target) if target else None,
        no_target=len(no_target),
        failed=sum(s.failed for s in items),
        intersection=sum_i,
        union=sum_u,
    )


@dataclass(frozen=True)
class Breakdown:
    """Metrics overall, per split, per tag, and per tag within each split."""

    overall: Summary
    splits: dict[str, Summary]
    tags: dict[str, Summary]
    split_tags: dict[str, dict[str, Summary]]
    failed: list[tuple[str, str]] = field(default_factory=list)
    """``(sample id, failure message)`` of every failed sample, sorted by id."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_dict(),
            "splits": {
                split: {
                    **summary.to_dict(),
                    "tags": {t: s.to_dict() for t, s in self.split_tags.get(split, {}).items()},
                }
                for split, summary in self.splits.items()
            },
            "tags": {t: s.to_dict() for t, s in self.tags.items()},
            "failed": [{"id": i, "failure": msg} for i, msg in self.failed],
        }


def breakdown(samples: Iterable[ScoredSample]) -> Breakdown:
    """Summaries overall, per split and per tag; keys are sorted for a stable output."""
    items = sorted(samples, key=lambda s: s.id)
    by_split: dict[str, list[ScoredSample]] = {}
    by_tag: dict[str, list[ScoredSample]] = {}
    by_split_tag: dict[str, dict[str, list[ScoredSample]]] = {}
    for s in items:
        by_split.setdefault(s.split, []).append(s)
        for tag in s.tags:
            by_tag.setdefault(tag, []).append(s)
            by_split_tag.setdefault(s.split, {}).setdefault(tag, []).append(s)
    return Breakdown(
        overall=summarize(items),
        splits={k: summarize(v) for k, v in sorted(by_split.items())},
        tags={k: summarize(v) for k, v in sorted(by_tag.items())},
        split_tags={
            split: {t: summarize(v) for t, v in sorted(tags.items())}
            for split, tags in sorted(by_split_tag.items())
        },
        failed=[(s.id, s.failure or "failed") for s in items if s.failed],
    )
