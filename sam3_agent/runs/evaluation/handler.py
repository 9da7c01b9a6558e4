"""Evaluating one sample: predict, score against the ground truth, record.

:class:`SampleHandler` is what every engine worker runs (see :mod:`sam3_agent.runs.jobs`),
for images :class:`EvalHandler`, for videos
:class:`~sam3_agent.runs.evaluation.video.handler.VideoEvalHandler`. An image's predictor is
the agent (:class:`AgentPredictor`) or SAM 3 alone (:class:`Sam3OnlyPredictor`).
One sample never stops a run (:mod:`~sam3_agent.runs.jobs.failures`): whatever its image
loading or its prediction raises is stored as that sample's failure, scored as an empty
prediction, and evaluated again by ``--retry-failed``. Only an interrupt, a broken ground
truth, or a failing results store stops the run, keeping what was committed.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.sam3_only import segment_only
from sam3_agent.backends.base import Segmenter
from sam3_agent.runs.evaluation.datasets import Sample
from sam3_agent.runs.evaluation.metrics import score_mask
from sam3_agent.runs.evaluation.results import EvalRecord, SampleResult
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY, ImageSource, Job, Prebuilt
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, run_jobs
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.failures import job_failure
from sam3_agent.runs.jobs.local import LocalEngine
from sam3_agent.runs.jobs.records import OUTCOME_FIELDS, agent_outcome
from sam3_agent.runs.jobs.store import ResultStore, job_dir_name
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import DatasetError
from sam3_agent.values.images import RGBImage
from sam3_agent.values.rle import encode_rle

if TYPE_CHECKING:
    from sam3_agent.agent.result import AgentResult
    from sam3_agent.agent.video.result import VideoResult

SAMPLES_DIR = "samples"


@dataclass(frozen=True)
class Outcome:
    """What a predictor answered for one sample, image or video, beside its masks.

    ``status`` is ``masks``, ``no_mask`` or ``failed``; ``extra`` holds JSON-safe details kept
    in the store (usage breakdown, timings).
    """

    status: str
    _: KW_ONLY
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    failure: str | None = None
    artifacts: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction(Outcome):
    """An image prediction: ``mask``, the ``(H, W)`` bool union of the predicted masks,
    None when there are none."""

    mask: BoolArray | None


class Predictor(Protocol):
    """Answers one query on one image."""

    @property
    def model(self) -> str:
        """What produced the predictions, for run settings and reports."""
        ...

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        """Segment ``query`` on an ``(H, W, 3)`` uint8 image; ``output_dir`` is this sample's
        own directory for artifacts (may be left unused)."""
        ...


@dataclass(frozen=True)
class AgentPredictor:
    """The full agent: MLLM + SAM 3. Writes result.json / overlay.png / trace.jsonl per sample."""

    agent: Sam3Agent
    model: str

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        result = await self.agent.arun(image, query, output_dir=output_dir)
        has_masks = result.status == "masks" and len(result.detections) > 0
        return Prediction(
            **agent_outcome(result),
            mask=result.detections.union() if has_masks else None,
            artifacts=output_dir,
            extra=agent_details(result),
        )


def agent_details(result: AgentResult | VideoResult) -> dict[str, Any]:
    """What an evaluation keeps of the agent's answer beside the outcome, on an image or a
    video: its usage breakdown, timings and the phrases it tried."""
    return {
        "usage": result.usage.to_dict(),
        "timings_s": {k: round(float(v), 4) for k, v in result.timings.items()},
        "phrases_tried": list(result.phrases_tried),
    }


class Sam3OnlyPredictor:
    """SAM 3 alone, the raw query as its phrase: the paper's baseline without an MLLM. The
    prediction is the union of what :func:`~sam3_agent.agent.sam3_only.segment_only` keeps."""

    def __init__(
        self, segmenter: Segmenter, model: str, *, config: AgentConfig | None = None
    ) -> None:
        self.segmenter = segmenter
        self._model = model
        self.config = config or AgentConfig()

    @property
    def model(self) -> str:
        return self._model

    def _predict_sync(self, image: RGBImage, query: str) -> Prediction:
        result = segment_only(self.segmenter, image, query, config=self.config)
        kept = result.detections
        if len(kept) == 0:
            return Prediction(status="no_mask", mask=None, extra={"masks": 0})
        return Prediction(status="masks", mask=kept.union(), extra={"masks": len(kept)})

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        # The segmenter is synchronous and heavy: keep the event loop free for other samples.
        return await asyncio.to_thread(self._predict_sync, image, query)


P = TypeVar("P", bound=Outcome)
S = TypeVar("S", bound=Job)
RR = TypeVar("RR", bound=EvalRecord)


@dataclass(frozen=True)
class Attempt(Generic[P]):
    """One sample's prediction as :meth:`SampleHandler.run` made it, of an image or a video.

    ``infra_error``: ``prediction`` stands for what the predictor raised. ``elapsed`` is in
    seconds; ``rel_dir`` is relative to the run directory.
    """

    prediction: P
    infra_error: bool
    elapsed: float
    rel_dir: Path

    def record_fields(self) -> dict[str, Any]:
        p = self.prediction
        return {
            **{name: getattr(p, name) for name in OUTCOME_FIELDS},
            "time_s": round(self.elapsed, 4),
            "infra_error": self.infra_error,
            "artifacts": str(self.rel_dir) if p.artifacts is not None else None,
            "extra": p.extra,
        }


class SampleHandler(ABC, Generic[S, P, RR]):
    """Evaluates samples of one kind on one worker: predict, score, record (what the image
    and the video handler share). The local engine runs it in this process, the Ray engine
    on each actor (see :mod:`sam3_agent.runs.jobs`).

    Whatever :meth:`predict` raises becomes :meth:`failed` (see
    :func:`~sam3_agent.runs.jobs.failures.job_failure`), so one sample never stops a run;
    :meth:`record` scores in a worker thread and may raise ``DatasetError`` (the run stops).
    """

    run_dir: Path

    @abstractmethod
    async def predict(self, sample: S, images: ImageSource, output_dir: Path) -> P: ...

    @abstractmethod
    def failed(self, failure: str) -> P: ...

    @abstractmethod
    def record(self, sample: S, done: Attempt[P]) -> RR: ...

    async def run(self, job: S, images: ImageSource) -> RR:
        rel_dir = Path(SAMPLES_DIR) / job_dir_name(job.id)
        started = time.perf_counter()
        try:
            prediction, infra_error = await self.predict(job, images, self.run_dir / rel_dir), False
        except BaseException as e:
            prediction, infra_error = self.failed(job_failure("sample", job.id, e)), True
        done = Attempt(prediction, infra_error, time.perf_counter() - started, rel_dir)
        return await asyncio.to_thread(self.record, job, done)

    def release(self, digest: str) -> None:
        return None


@dataclass
class EvalHandler(SampleHandler[Sample, Prediction, SampleResult]):
    """Evaluates image samples against their masks. Images above ``max_pixels`` (``None``:
    the package's default limit) are the sample's failure."""

    predictor: Predictor
    run_dir: Path
    shared: SharedEmbeddings | None = None
    max_pixels: int | None = field(default=None, kw_only=True)

    async def predict(self, sample: Sample, images: ImageSource, output_dir: Path) -> Prediction:
        image = await images.get(
            sample.image_path, exif_orientation=sample.exif_orientation, max_pixels=self.max_pixels
        )
        return await self.predictor.predict(image, sample.query, output_dir)

    def failed(self, failure: str) -> Prediction:
        return Prediction(status="failed", mask=None, failure=failure)

    def record(self, sample: Sample, done: Attempt[Prediction]) -> SampleResult:
        gt = sample.load_gt()
        mask = done.prediction.mask
        if mask is not None and mask.shape != gt.image_size:
            raise DatasetError(
                f"sample {sample.id}: image {sample.image_path} is {mask.shape[0]}x"
                f"{mask.shape[1]} pixels but its ground truth is {gt.image_size[0]}x"
                f"{gt.image_size[1]}"
            )
        pred = mask if mask is not None else np.zeros(gt.image_size, dtype=bool)
        score = score_mask(pred, gt.mask, gt.ignore)
        return SampleResult(
            id=sample.id, split=sample.split, tags=sample.tags, no_target=sample.no_target,
            image_path=str(sample.image_path), query=sample.query, **done.record_fields(),
            intersection=score.intersection, union=score.union, pred_area=score.pred_area,
            gt_area=score.gt_area, prediction=_rle_or_none(pred),
            ground_truth=_rle_or_none(gt.mask), ignore=_rle_or_none(gt.ignore),
        )  # fmt: skip

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


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
    """Evaluate every sample not yet in ``store`` in this process, committing each as it finishes.

    The local engine with a predictor built by the caller (a test's, a benchmark's);
    :func:`sam3_agent.runs.evaluation.run.evaluate` builds its own on any engine. ``shared``
    is the segmenter wrapper the predictor uses, so an image's embedding is released when its
    last sample is done. A broken ground truth (``DatasetError``) stops the run; commits are kept.
    """
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
