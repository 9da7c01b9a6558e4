"""The record of one evaluated sample, as the run's results store keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sam3_agent.runs.evaluation.metrics import SampleScore, ScoredSample
from sam3_agent.runs.jobs.records import JobRecord


@dataclass(frozen=True, kw_only=True)
class EvalRecord(JobRecord):
    """What an image and a video sample's record share: the sample's ``split``, ``tags``
    (stored as a JSON list) and ``no_target``, for the metrics by split and tag."""

    split: str
    tags: tuple[str, ...]
    no_target: bool

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        return doc

    @classmethod
    def _upgrade(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        return {**doc, "tags": tuple(doc.get("tags", ()))}


@dataclass(frozen=True, kw_only=True)
class SampleResult(EvalRecord):
    """One finished sample: a :class:`~sam3_agent.runs.jobs.records.JobRecord` and its score.

    A sample that raised is scored as an empty prediction. ``time_s`` is the prediction's.

    Attributes:
        intersection, union, pred_area, gt_area: as
            :class:`~sam3_agent.runs.evaluation.metrics.SampleScore` counts them.
        ground_truth / ignore: COCO RLE of the target and the ignore region (for the gallery).
    """

    intersection: int
    union: int
    pred_area: int
    gt_area: int
    ground_truth: dict[str, Any] | None = None
    ignore: dict[str, Any] | None = None

    @property
    def score(self) -> SampleScore:
        return SampleScore(self.intersection, self.union, self.pred_area, self.gt_area)

    @property
    def iou(self) -> float:
        return self.score.iou

    def scored(self) -> ScoredSample:
        """The view :mod:`~sam3_agent.runs.evaluation.metrics` works on."""
        return ScoredSample(
            self.id, self.split, self.tags, self.no_target, self.score, self.failed, self.failure
        )
