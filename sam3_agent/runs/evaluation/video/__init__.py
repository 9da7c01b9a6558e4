"""Evaluation on referring and reasoning *video* segmentation datasets.

Modules:

* :mod:`~sam3_agent.runs.evaluation.catalog`: the datasets by name, their splits and
  which of them have no public ground truth (no heavy import: ``eval --help`` lists them).
* :mod:`~sam3_agent.runs.evaluation.video.datasets`: Ref-YouTube-VOS, Ref-DAVIS17, MeViS,
  ReVOS and ReasonVOS in their published layouts, as :class:`VideoSample` values whose
  ground truth decodes one frame at a time.
* :mod:`~sam3_agent.runs.evaluation.video.metrics`: J, F and J&F as the DAVIS benchmark
  defines them, per frame, per video (streamed) and per dataset / subset.
* :mod:`~sam3_agent.runs.evaluation.video.published`: AgentRVOS's published J&F.

The public API, in the order a scorer uses it::

    info = VIDEO_DATASETS["revos"]                  # splits, unscorable splits, overall rule
    samples = load_video_samples("revos", root, "valid")
    for sample in samples:                          # sample.frame_paths, sample.query
        acc = VideoAccumulator()
        for pred, gt in zip(predicted_masks, sample.ground_truth(), strict=True):
            acc.update(pred, gt)                    # pred: (H, W) bool or None; gt None: skip
        scored.append(ScoredVideo(sample.id, sample.tags, acc.result()))
    report = breakdown(scored, overall_from=info.overall_from)   # .overall.jf, .tags[...]
    figures = video_published_for("revos")

``sample.ground_truth()`` raises :class:`~sam3_agent.values.errors.DatasetError` at once for
a split without public masks (Ref-YouTube-VOS valid, MeViS valid), naming the official
server. Names are imported on first use: importing this package loads no numpy or OpenCV.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sam3_agent.values.lazy import lazy_exports

if TYPE_CHECKING:
    from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, VideoDatasetInfo
    from sam3_agent.runs.evaluation.video.datasets import VideoSample, load_video_samples
    from sam3_agent.runs.evaluation.video.metrics import (
        ScoredVideo,
        VideoAccumulator,
        VideoBreakdown,
        VideoScore,
        VideoSummary,
        breakdown,
        score_video,
        summarize,
    )
    from sam3_agent.runs.evaluation.video.published import VIDEO_PUBLISHED, video_published_for

_CATALOG = "sam3_agent.runs.evaluation.catalog"
_DATASETS = "sam3_agent.runs.evaluation.video.datasets"
_METRICS = "sam3_agent.runs.evaluation.video.metrics"
_PUBLISHED = "sam3_agent.runs.evaluation.video.published"

__getattr__ = lazy_exports(
    __name__,
    {
        "VIDEO_DATASETS": _CATALOG,
        "VideoDatasetInfo": _CATALOG,
        "VideoSample": _DATASETS,
        "load_video_samples": _DATASETS,
        "ScoredVideo": _METRICS,
        "VideoAccumulator": _METRICS,
        "VideoBreakdown": _METRICS,
        "VideoScore": _METRICS,
        "VideoSummary": _METRICS,
        "breakdown": _METRICS,
        "score_video": _METRICS,
        "summarize": _METRICS,
        "VIDEO_PUBLISHED": _PUBLISHED,
        "video_published_for": _PUBLISHED,
    },
)

__all__ = [
    "VIDEO_DATASETS",
    "VIDEO_PUBLISHED",
    "ScoredVideo",
    "VideoAccumulator",
    "VideoBreakdown",
    "VideoDatasetInfo",
    "VideoSample",
    "VideoScore",
    "VideoSummary",
    "breakdown",
    "load_video_samples",
    "score_video",
    "summarize",
    "video_published_for",
]
