"""The records of evaluated samples, image and video, as the run's results store keeps them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sam3_agent.runs.evaluation.metrics import SampleScore, ScoredSample
from sam3_agent.runs.evaluation.video.metrics import ScoredVideo, VideoScore
from sam3_agent.runs.jobs.records import JobRecord


@dataclass(frozen=True, kw_only=True)
class EvalRecord(JobRecord):
    """What every sample's record holds beside the job's: ``split``, ``tags`` (stored as a
    JSON list) and ``no_target``, for the metrics by split and tag."""

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
    """One finished image sample and its pixel counts (as
    :class:`~sam3_agent.runs.evaluation.metrics.SampleScore`); a sample that raised scores as
    an empty prediction. ``ground_truth`` / ``ignore``: COCO RLE, for the gallery."""

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
        return ScoredSample(
            self.id, self.split, self.tags, self.no_target, self.score, self.failed, self.failure
        )


@dataclass(frozen=True, kw_only=True)
class VideoSampleResult(EvalRecord):
    """One finished video sample: mean ``j`` and ``f`` over its annotated frames, in
    ``[0, 1]`` (a failure or no track: empty on every frame). ``image_path`` is the frame
    folder; the selected tracks are in the sample's ``result.json``; ``frames_used``: frames
    tracked (0 when the video could not be opened)."""

    j: float
    f: float
    frames_scored: int
    frames_used: int = 0

    def scored(self) -> ScoredVideo:
        score = VideoScore(j=self.j, f=self.f, frames=self.frames_scored)
        return ScoredVideo(self.id, self.tags, score, self.failed, self.failure)
