"""Running figures for a progress display, one finished sample at a time: gIoU and cIoU of
an image run, J, F and J&F (the dataset's official overall) of a video run."""

from __future__ import annotations

from collections.abc import Sequence

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS
from sam3_agent.runs.evaluation.metrics import ScoredSample
from sam3_agent.runs.evaluation.video.metrics import ScoredVideo


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
    """J, F, J&F and failures so far: the mean of the ``overall_from`` tags' means (ReVOS),
    else the mean over every sample."""

    def __init__(self, overall_from: Sequence[str] | None = None) -> None:
        self.overall_from = overall_from
        self.sums: dict[str | None, list[float]] = {}  # tag (None: all) -> [count, ΣJ, ΣF]
        self.failed = 0

    def add(self, video: ScoredVideo) -> None:
        for key in (None, *video.tags):
            sums = self.sums.setdefault(key, [0, 0.0, 0.0])
            sums[0] += 1
            sums[1] += video.score.j
            sums[2] += video.score.f
        self.failed += int(video.failed)

    def figures(self) -> list[tuple[str, float | None]]:
        """``[("J", ...), ("F", ...), ("J&F", ...)]``, None before any sample."""
        keys: Sequence[str | None] = self.overall_from or (None,)
        parts = [self.sums[k] for k in keys if k in self.sums]
        if not parts:
            return [("J", None), ("F", None), ("J&F", None)]
        j = sum(p[1] / p[0] for p in parts) / len(parts)
        f = sum(p[2] / p[0] for p in parts) / len(parts)
        return [("J", j), ("F", f), ("J&F", (j + f) / 2)]


def running_metrics(dataset: str) -> RunningMetrics | RunningVideoMetrics:
    """The running figures a progress display shows for ``dataset``."""
    info = VIDEO_DATASETS.get(dataset)
    return RunningMetrics() if info is None else RunningVideoMetrics(info.overall_from)
