"""Evaluating one sample, image or video, on an engine worker: predict, score, record.
Whatever a sample's prediction raises is its failure, scored as empty; only an interrupt, a
broken ground truth (``DatasetError``) or a failing results store stops the run."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.sam3_only import segment_only
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.media.video import open_video
from sam3_agent.runs.evaluation.datasets import Sample
from sam3_agent.runs.evaluation.metrics import score_mask
from sam3_agent.runs.evaluation.results import EvalRecord, SampleResult, VideoSampleResult
from sam3_agent.runs.evaluation.video.datasets import VideoSample
from sam3_agent.runs.evaluation.video.metrics import VideoAccumulator, VideoScore
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY, ImageSource, Prebuilt
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, run_jobs
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.failures import job_failure
from sam3_agent.runs.jobs.local import LocalEngine
from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource
from sam3_agent.runs.jobs.records import agent_outcome
from sam3_agent.runs.jobs.store import ResultStore, job_dir_name
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import DatasetError
from sam3_agent.values.images import RGBImage
from sam3_agent.values.rle import encode_rle
from sam3_agent.values.tracks import Tracks

SAMPLES_DIR = "samples"
EVERY_FRAME = FrameSelection()
"""The frames a video sample is tracked on: all of its folder's, in name order (stride 1)."""


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What a predictor answered: ``outcome`` the record's outcome fields (``status`` and, where
    known, rounds, tokens, calls, failure); ``extra`` JSON-safe details. An image's ``mask`` is
    the ``(H, W)`` bool union of the predicted masks (None: none); a video's ``tracks`` come
    with ``positions``, frame file stem -> its position among the frames they are keyed by."""

    outcome: Mapping[str, Any]
    artifacts: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    mask: BoolArray | None = None
    tracks: Tracks | None = None
    positions: Mapping[str, int] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return str(self.outcome["status"])


class Predictor(Protocol):
    """Segments ``query`` on an ``(H, W, 3)`` uint8 image (artifacts may go to ``output_dir``)."""

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction: ...


def agent_details(result: AgentResult | VideoResult) -> dict[str, Any]:
    """What a sample keeps of the agent's answer: usage breakdown, timings, phrases tried."""
    return {
        "usage": result.usage.to_dict(),
        "timings_s": {k: round(float(v), 4) for k, v in result.timings.items()},
        "phrases_tried": list(result.phrases_tried),
    }


@dataclass(frozen=True)
class AgentPredictor:
    """The full agent: MLLM + SAM 3. Writes result.json / overlay.png / trace.jsonl per sample."""

    agent: Sam3Agent

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        result = await self.agent.arun(image, query, output_dir=output_dir)
        has_masks = result.status == "masks" and len(result.detections) > 0
        return Prediction(
            outcome=agent_outcome(result),
            mask=result.detections.union() if has_masks else None,
            artifacts=output_dir,
            extra=agent_details(result),
        )


@dataclass(frozen=True)
class Sam3OnlyPredictor:
    """SAM 3 alone with the raw query as its phrase (the paper's baseline)."""

    segmenter: Segmenter
    config: AgentConfig = field(default_factory=AgentConfig, kw_only=True)

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        # The segmenter is synchronous and heavy: keep the event loop free for other samples.
        result = await asyncio.to_thread(
            segment_only, self.segmenter, image, query, config=self.config
        )
        kept = result.detections
        status, mask = ("masks", kept.union()) if len(kept) else ("no_mask", None)
        return Prediction(outcome={"status": status}, mask=mask, extra={"masks": len(kept)})


def score_prediction(sample: VideoSample, prediction: Prediction) -> VideoScore:
    """Mean J and F over the sample's annotated frames, decoded one at a time; a frame's
    prediction is the union of the tracks there."""
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


S = TypeVar("S", Sample, VideoSample)
RR = TypeVar("RR", bound=EvalRecord)


class SampleHandler(ABC, Generic[S, RR]):
    """Evaluates samples of one medium on one worker: what :meth:`predict` raises becomes
    :meth:`failed`; :meth:`record` scores in a thread, given the record's other fields, and
    may raise ``DatasetError`` (the run stops)."""

    run_dir: Path

    @abstractmethod
    async def predict(self, sample: S, images: ImageSource, output_dir: Path) -> Prediction: ...

    @abstractmethod
    def record(self, sample: S, prediction: Prediction, fields: dict[str, Any]) -> RR: ...

    async def run(self, job: S, images: ImageSource) -> RR:
        rel_dir = Path(SAMPLES_DIR) / job_dir_name(job.id)
        started = time.perf_counter()
        try:
            prediction, infra_error = await self.predict(job, images, self.run_dir / rel_dir), False
        except BaseException as e:
            failure = job_failure("sample", job.id, e)
            prediction = Prediction(outcome={"status": "failed", "failure": failure})
            infra_error = True
        fields = {
            "id": job.id,
            "image_path": str(job.image_path),
            "query": job.query,
            "split": job.split,
            "tags": job.tags,
            "no_target": job.no_target,
            **prediction.outcome,
            "time_s": round(time.perf_counter() - started, 4),
            "infra_error": infra_error,
            "artifacts": str(rel_dir) if prediction.artifacts is not None else None,
            "extra": prediction.extra,
        }
        return await asyncio.to_thread(self.record, job, prediction, fields)

    def release(self, digest: str) -> None:
        return None


@dataclass
class EvalHandler(SampleHandler[Sample, SampleResult]):
    """Image samples against their masks; an image above ``max_pixels`` (None: the
    package's limit) is the sample's failure."""

    predictor: Predictor
    run_dir: Path
    shared: SharedEmbeddings | None = None
    max_pixels: int | None = field(default=None, kw_only=True)

    async def predict(self, sample: Sample, images: ImageSource, output_dir: Path) -> Prediction:
        image = await images.get(
            sample.image_path, exif_orientation=sample.exif_orientation, max_pixels=self.max_pixels
        )
        return await self.predictor.predict(image, sample.query, output_dir)

    def record(
        self, sample: Sample, prediction: Prediction, fields: dict[str, Any]
    ) -> SampleResult:
        gt = sample.load_gt()
        mask = prediction.mask
        if mask is not None and mask.shape != gt.image_size:
            raise DatasetError(
                f"sample {sample.id}: image {sample.image_path} is {mask.shape[0]}x"
                f"{mask.shape[1]} pixels but its ground truth is {gt.image_size[0]}x"
                f"{gt.image_size[1]}"
            )
        pred = mask if mask is not None else np.zeros(gt.image_size, dtype=bool)
        score = score_mask(pred, gt.mask, gt.ignore)
        return SampleResult(
            **fields,
            **asdict(score),
            prediction=_rle_or_none(pred),
            ground_truth=_rle_or_none(gt.mask),
            ignore=_rle_or_none(gt.ignore),
        )

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


@dataclass
class VideoEvalHandler(SampleHandler[VideoSample, VideoSampleResult]):
    """Video samples through the video agent, on every frame of the sample's frame folder
    (it writes its run files), scored frame by frame; no image features to release."""

    agent: Sam3VideoAgent
    run_dir: Path

    async def predict(
        self, sample: VideoSample, images: ImageSource, output_dir: Path
    ) -> Prediction:
        video = await asyncio.to_thread(
            open_video,
            sample.frames_dir,
            EVERY_FRAME,
            max_pixels=self.agent.config.max_image_pixels,
        )
        result = await self.agent.arun(video, sample.query, output_dir=output_dir)
        selected = result.status == "masks" and len(result.tracks) > 0
        positions: dict[str, int] = {}  # frame file stem -> position among those tracked
        for position, index in enumerate(video.indices):
            positions.setdefault(Path(video.frame_names[index]).stem, position)
        return Prediction(
            outcome={**agent_outcome(result), "frames_used": video.frame_count},
            tracks=result.tracks if selected else None,
            positions=positions,
            artifacts=output_dir,
            extra={**agent_details(result), "tracks": len(result.tracks) if selected else 0},
        )

    def record(
        self, sample: VideoSample, prediction: Prediction, fields: dict[str, Any]
    ) -> VideoSampleResult:
        score = score_prediction(sample, prediction)
        return VideoSampleResult(**fields, j=score.j, f=score.f, frames_scored=score.frames)


@dataclass(frozen=True)
class EvalWorkerFactory(LeavesChatModelOnDriver):
    """The handler per worker, built where the work runs: the agent, SAM 3 alone
    (``sam3_only``) or the video agent (``video`` set)."""

    backends: ModelSource
    agent_config: AgentConfig
    sam3_only: bool
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True
    video: VideoOptions | None = None

    def build(self, run_dir: Path) -> EvalHandler | VideoEvalHandler:
        predictor: Predictor
        with self.loading():
            if self.video is not None:
                segmenter = self.backends.build_video_segmenter()
                tracker = Sam3VideoAgent(
                    segmenter, self.worker_chat_model(), self.agent_config, self.video
                )
                return VideoEvalHandler(tracker, run_dir)
            shared = self.shared_segmenter()
            if self.sam3_only:
                predictor = Sam3OnlyPredictor(shared, config=self.agent_config)
            else:
                agent = Sam3Agent(shared, self.worker_chat_model(), self.agent_config)
                predictor = AgentPredictor(agent)
        return EvalHandler(
            predictor, run_dir, shared, max_pixels=self.agent_config.max_image_pixels
        )


async def evaluate_samples(
    samples: Sequence[Sample],
    store: ResultStore[SampleResult],
    predictor: Predictor,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    shared: SharedEmbeddings | None = None,
    progress: ProgressListener[SampleResult] | None = None,
    retry_failed: bool = False,
) -> RunOutcome:
    """Evaluate every sample not yet in ``store`` here with a predictor the caller built;
    ``shared``: the predictor's segmenter wrapper, released after each image's last sample."""
    return await run_jobs(
        samples,
        store,
        LocalEngine(concurrency=concurrency),
        Prebuilt(EvalHandler(predictor, store.run_dir, shared)),
        progress=progress,
        retry_failed=retry_failed,
    )


def _rle_or_none(mask: BoolArray | None) -> dict[str, Any] | None:
    return None if mask is None or not mask.any() else encode_rle(mask)
