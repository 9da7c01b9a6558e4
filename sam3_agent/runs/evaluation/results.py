"""The record of one evaluated sample, as the run's results store keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sam3_agent.runs.evaluation.metrics import SampleScore, ScoredSample


@dataclass(frozen=True)
class SampleResult:
    """One finished sample as stored (a :class:`~sam3_agent.runs.jobs.base.JobResult`).

    Attributes:
        status: the agent's ``masks`` / ``no_mask`` / ``failed``. A sample that raised (a
            backend failure, an unreadable image, any other error) is ``failed`` with
            ``infra_error`` set and the exception on one line in ``failure``; it is scored
            as an empty prediction and ``--retry-failed`` evaluates it again.
        prediction: the union of the predicted masks as COCO RLE (None when empty).
        ground_truth / ignore: COCO RLE of the target and the ignore region (for the gallery).
        artifacts: the sample's directory relative to the run directory, if one was written.
        time_s: wall-clock seconds of the prediction.
    """

    id: str
    split: str
    tags: tuple[str, ...]
    no_target: bool
    image_path: str
    query: str
    status: str
    intersection: int
    union: int
    pred_area: int
    gt_area: int
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    time_s: float = 0.0
    failure: str | None = None
    infra_error: bool = False
    prediction: dict[str, Any] | None = None
    ground_truth: dict[str, Any] | None = None
    ignore: dict[str, Any] | None = None
    artifacts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def score(self) -> SampleScore:
        return SampleScore(self.intersection, self.union, self.pred_area, self.gt_area)

    @property
    def iou(self) -> float:
        return self.score.iou

    def scored(self) -> ScoredSample:
        """The view :mod:`~sam3_agent.runs.evaluation.metrics` works on."""
        return ScoredSample(
            id=self.id,
            split=self.split,
            tags=self.tags,
            no_target=self.no_target,
            score=self.score,
            failed=self.failed,
            failure=self.failure,
        )

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["tags"] = list(self.tags)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SampleResult:
        data = dict(doc)
        data["tags"] = tuple(data.get("tags", ()))
        return cls(**data)
