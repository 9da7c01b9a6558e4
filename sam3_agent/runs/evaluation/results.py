"""The records of evaluated samples, image and video, and the running figures over them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS
from sam3_agent.runs.evaluation.metrics import SampleScore, ScoredSample
from sam3_agent.runs.evaluation.video.metrics import ScoredVideo, VideoScore, breakdown
from sam3_agent.runs.jobs.records import JobRecord


@dataclass(frozen=True, kw_only=True)
class EvalRecord(JobRecord):
    """What every sample's record holds beside the job's, for the metrics by split and tag."""

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
    """One finished image sample and its pixel counts; ``ground_truth`` / ``ignore``: COCO RLE,
    for the gallery."""

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
    """One finished video sample: mean ``j`` and ``f`` over its annotated frames, in ``[0, 1]``;
    ``frames_used``: frames tracked (0 when the video could not be opened)."""

    j: float
    f: float
    frames_scored: int
    frames_used: int = 0

    def scored(self) -> ScoredVideo:
        score = VideoScore(j=self.j, f=self.f, frames=self.frames_scored)
        return ScoredVideo(self.id, self.tags, score, self.failed, self.failure)


class RunningMetrics:
    """gIoU, cIoU and failures so far."""

    def __init__(self) -> None:
        self.count = self.failed = self._sum_i = self._sum_u = 0
        self._iou_sum = 0.0

    def add(self, sample: ScoredSample) -> None:
        self.count += 1
        self.failed += int(sample.failed)
        self._iou_sum += sample.iou
        self._sum_i += sample.score.intersection
        self._sum_u += sample.score.union

    @property
    def giou(self) -> float | None:
        return self._iou_sum / self.count if self.count else None

    @property
    def ciou(self) -> float | None:
        return self._sum_i / self._sum_u if self._sum_u else None

    def figures(self) -> list[tuple[str, float | None]]:
        """``[("gIoU", ...), ("cIoU", ...)]``, None before any sample."""
        return [("gIoU", self.giou), ("cIoU", self.ciou)]


class RunningVideoMetrics:
    """J, F, J&F and failures so far, overall as the report computes it."""

    def __init__(self, overall_from: Sequence[str] | None = None) -> None:
        self.overall_from = overall_from
        self.videos: list[ScoredVideo] = []

    def add(self, video: ScoredVideo) -> None:
        self.videos.append(video)

    @property
    def failed(self) -> int:
        return sum(v.failed for v in self.videos)

    def figures(self) -> list[tuple[str, float | None]]:
        """``[("J", ...), ("F", ...), ("J&F", ...)]``, None before any sample."""
        overall = breakdown(self.videos, overall_from=self.overall_from).overall
        return [("J", overall.j), ("F", overall.f), ("J&F", overall.jf)]


def running_metrics(dataset: str) -> RunningMetrics | RunningVideoMetrics:
    """The running figures of ``dataset``: gIoU and cIoU, or J, F and J&F."""
    info = VIDEO_DATASETS.get(dataset)
    return RunningMetrics() if info is None else RunningVideoMetrics(info.overall_from)
