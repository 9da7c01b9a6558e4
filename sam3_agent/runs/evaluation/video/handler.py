"""Evaluating one video sample: run the video agent on its frames, score it frame by frame,
record.

:class:`VideoEvalHandler` is the video medium of
:class:`~sam3_agent.runs.evaluation.handler.SampleHandler`, with its failure policy.

The agent runs on the sample's frame folder, every frame (stride 1). Its tracks are keyed by
frame *position* among the frames it used; :func:`score_prediction` maps each frame the
dataset lists to its position by the frame's file name, and scores the frames that have
ground truth, one at a time: the prediction at a frame is the union of the selected tracks
there, decoded for that frame only, so a video's masks are never all held at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.media.video import VideoSource, open_video
from sam3_agent.runs.evaluation.handler import Attempt, Outcome, SampleHandler, agent_details
from sam3_agent.runs.evaluation.video.datasets import VideoSample
from sam3_agent.runs.evaluation.video.metrics import VideoAccumulator, VideoScore
from sam3_agent.runs.evaluation.video.results import VideoSampleResult
from sam3_agent.runs.jobs.base import ImageSource
from sam3_agent.runs.jobs.records import agent_outcome
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import DatasetError
from sam3_agent.values.tracks import Tracks

EVERY_FRAME = FrameSelection()
"""The frames a sample is tracked on: all of its folder's, in name order (stride 1)."""


@dataclass(frozen=True)
class VideoPrediction(Outcome):
    """A video prediction; ``positions`` maps a frame file stem to its position among the
    frames the ``tracks`` are keyed by."""

    tracks: Tracks | None = None
    positions: Mapping[str, int] = field(default_factory=dict)
    frames_used: int = 0


class VideoPredictor(Protocol):
    """Answers one video sample."""

    @property
    def model(self) -> str:
        """What produced the predictions, for run settings and reports."""
        ...

    async def predict(self, sample: VideoSample, output_dir: Path) -> VideoPrediction:
        """Track ``sample.query`` through the sample's frames; artifacts go to ``output_dir``."""
        ...


def frame_positions(video: VideoSource) -> dict[str, int]:
    """Frame file stem -> position among the frames ``video`` uses (a frame folder)."""
    positions: dict[str, int] = {}
    for position, index in enumerate(video.indices):
        positions.setdefault(Path(video.frame_names[index]).stem, position)
    return positions


@dataclass(frozen=True)
class VideoAgentPredictor:
    """The video agent on the sample's frame folder, every frame. Writes ``result.json``,
    ``overlay.mp4``, the contact sheet and ``trace.jsonl`` per sample."""

    agent: Sam3VideoAgent
    model: str

    async def predict(self, sample: VideoSample, output_dir: Path) -> VideoPrediction:
        video = await asyncio.to_thread(
            open_video,
            sample.frames_dir,
            EVERY_FRAME,
            max_pixels=self.agent.config.max_image_pixels,
        )
        result = await self.agent.arun(video, sample.query, output_dir=output_dir)
        selected = result.status == "masks" and len(result.tracks) > 0
        return VideoPrediction(
            **agent_outcome(result),
            tracks=result.tracks if selected else None,
            positions=frame_positions(video),
            frames_used=video.frame_count,
            artifacts=output_dir,
            extra={**agent_details(result), "tracks": len(result.tracks) if selected else 0},
        )


def score_prediction(sample: VideoSample, prediction: VideoPrediction) -> VideoScore:
    """Mean J and F of ``prediction`` over the sample's annotated frames, one frame at a time
    (no prediction: an empty mask on every frame)."""
    tracks = prediction.tracks
    accumulator = VideoAccumulator()
    for index, gt in enumerate(sample.ground_truth()):
        name = sample.frame_names[index]
        if gt is None:
            continue  # not annotated: its prediction is never decoded
        mask = None
        if tracks is not None:
            position = prediction.positions.get(Path(name).stem)
            if position is None:
                raise DatasetError(
                    f"sample {sample.id}: frame {name} is listed but not in {sample.frames_dir}"
                )
            if tracks.size != gt.image_size:
                (h, w), (gh, gw) = tracks.size, gt.image_size
                raise DatasetError(
                    f"sample {sample.id}: frame {name} is {h}x{w} pixels but its ground truth "
                    f"is {gh}x{gw}"
                )
            mask = tracks.union_mask(position)
        accumulator.update(mask, gt)
    if not accumulator.frames:
        raise DatasetError(f"sample {sample.id}: no frame has ground truth to score")
    return accumulator.result()


@dataclass
class VideoEvalHandler(SampleHandler[VideoSample, VideoPrediction, VideoSampleResult]):
    """Evaluates video samples frame by frame. It holds no image features: :meth:`release`
    has nothing to free."""

    predictor: VideoPredictor
    run_dir: Path

    async def predict(
        self, sample: VideoSample, images: ImageSource, output_dir: Path
    ) -> VideoPrediction:
        return await self.predictor.predict(sample, output_dir)

    def failed(self, failure: str) -> VideoPrediction:
        return VideoPrediction(status="failed", failure=failure)

    def record(self, sample: VideoSample, done: Attempt[VideoPrediction]) -> VideoSampleResult:
        score = score_prediction(sample, done.prediction)
        return VideoSampleResult(
            id=sample.id, image_path=str(sample.frames_dir), query=sample.query,
            split=sample.split, tags=sample.tags, no_target=sample.no_target,
            **done.record_fields(), j=score.j, f=score.f, frames_scored=score.frames,
            frames_used=done.prediction.frames_used,
        )  # fmt: skip
