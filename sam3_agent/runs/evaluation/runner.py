"""Concurrent, resumable evaluation of dataset samples.

Samples run ``concurrency`` at a time on one event loop. They are ordered by image, and the
segmenter is wrapped in :class:`SharedEmbeddings`, so every image is read once and its SAM 3
backbone runs once however many queries it has. Each finished sample is scored and committed
to the :class:`~sam3_agent.runs.evaluation.store.ResultStore` at once; a rerun skips what is
stored. One sample never stops a run: whatever its image loading or its prediction raises
(MLLM endpoint down, SAM 3 out of memory, an unreadable image, or an error nobody foresaw)
is stored as that sample's failure with a one-line message, scored as an empty prediction,
and evaluated again by ``--retry-failed``. Only an interrupt (Ctrl-C, a cancellation, a
kill), a broken ground truth, or a failing results store stops the run, keeping what was
committed.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.base import ImageEmbedding, Segmenter
from sam3_agent.values.detections import BoolArray, encode_rle
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY, ImageSource, Prebuilt
from sam3_agent.runs.jobs.driver import ProgressListener, RunOutcome, run_jobs
from sam3_agent.runs.jobs.local import LocalEngine
from sam3_agent.values.errors import (
    ChatModelError,
    DatasetError,
    ImageLoadError,
    SegmenterError,
    UserError,
)
from sam3_agent.runs.evaluation.datasets import Sample
from sam3_agent.runs.evaluation.metrics import score_mask
from sam3_agent.runs.evaluation.store import ResultStore, SampleResult, sample_dir_name
from sam3_agent.values.images import RGBImage, image_digest
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

SAMPLES_DIR = "samples"

# The failures a backend announces; they are logged briefly. Any other exception of one
# sample is a failure too, logged with its traceback (it is likely a bug worth reporting).
SAMPLE_FAILURES: tuple[type[Exception], ...] = (ChatModelError, SegmenterError, ImageLoadError)
# What stops a run even when one sample raises it: the user or the system asked to stop.
STOPS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    asyncio.CancelledError,
    GeneratorExit,
)
FAILURE_MESSAGE_CHARS = 500


# --------------------------------------------------------------------------- sharding


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n`` (0-based shard index).

    Raises:
        UserError: not of that form.
    """
    try:
        index_text, count_text = text.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError as e:
        raise UserError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from e
    if count < 1 or not 0 <= index < count:
        raise UserError(f"--shard i/n needs 0 <= i < n, got {text!r}")
    return index, count


def shard_of(sample: Sample, count: int) -> int:
    """The shard a sample belongs to: a stable hash of its image's file name.

    Hashing the image (not the sample) keeps every query of an image in one shard, so no
    two machines pay the same image's backbone.
    """
    digest = hashlib.sha256(sample.image_path.name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def select_shard(samples: Sequence[Sample], index: int, count: int) -> list[Sample]:
    """The samples of shard ``index`` of ``count`` (all of them when ``count`` is 1)."""
    if count == 1:
        return list(samples)
    return [s for s in samples if shard_of(s, count) == index]


# --------------------------------------------------------------------------- shared embeddings


@dataclass
class _EmbeddingEntry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    embedding: ImageEmbedding | None = None


class SharedEmbeddings:
    """A :class:`Segmenter` that embeds each image once while the runner holds it.

    Keyed by the image's content digest, so copies of the same pixels share one embedding.
    Concurrent requests for one image wait for the first instead of running the backbone
    twice. The runner calls :meth:`release` when an image's last sample is done.
    """

    def __init__(self, inner: Segmenter) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._entries: dict[str, _EmbeddingEntry] = {}

    def embed(self, image: RGBImage) -> ImageEmbedding:
        key = image_digest(image)
        with self._lock:
            entry = self._entries.setdefault(key, _EmbeddingEntry())
        with entry.lock:
            if entry.embedding is None:
                entry.embedding = self.inner.embed(image)
            return entry.embedding

    def release(self, digest: str) -> None:
        """Forget the embedding of the image with this content digest."""
        with self._lock:
            self._entries.pop(digest, None)

    @property
    def held(self) -> int:
        """Images whose embedding is held now."""
        with self._lock:
            return len(self._entries)


# --------------------------------------------------------------------------- predictors


@dataclass(frozen=True)
class Prediction:
    """What a predictor answered for one sample.

    Attributes:
        status: ``masks``, ``no_mask`` or ``failed`` (the agent gave up).
        mask: ``(H, W)`` bool union of the predicted masks, None when there are none.
        artifacts: the per-sample directory written, if any.
        extra: JSON-safe details kept in the store (usage breakdown, timings).
    """

    status: str
    mask: BoolArray | None
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    failure: str | None = None
    artifacts: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Predictor(Protocol):
    """Answers one query on one image."""

    @property
    def model(self) -> str:
        """What produced the predictions, for run settings and reports."""
        ...

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        """Segment ``query`` on an ``(H, W, 3)`` uint8 image.

        ``output_dir`` is this sample's own directory for artifacts (may be left unused).

        Raises:
            ChatModelError, SegmenterError: the backend failed for this sample.
        """
        ...


class AgentPredictor:
    """The full agent: MLLM + SAM 3. Writes result.json / overlay.png / trace.jsonl per sample."""

    def __init__(self, agent: Sam3Agent, model: str) -> None:
        self.agent = agent
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        result = await self.agent.arun(image, query, output_dir=output_dir)
        has_masks = result.status == "masks" and len(result.detections) > 0
        total = result.usage.total
        return Prediction(
            status=result.status,
            mask=result.detections.union() if has_masks else None,
            rounds=result.rounds,
            prompt_tokens=total.prompt_tokens,
            completion_tokens=total.completion_tokens,
            calls=total.calls,
            failure=result.failure,
            artifacts=output_dir,
            extra={
                "usage": result.usage.to_dict(),
                "timings_s": {k: round(float(v), 4) for k, v in result.timings.items()},
                "phrases_tried": list(result.phrases_tried),
            },
        )


class Sam3OnlyPredictor:
    """SAM 3 alone, the raw query as its phrase: the paper's baseline without an MLLM.

    The prediction is the union of every mask scoring at least ``score_threshold``; no
    overlap removal (it changes nothing a union could see but the dropped masks' pixels).
    """

    def __init__(self, segmenter: Segmenter, model: str, *, score_threshold: float = 0.5) -> None:
        self.segmenter = segmenter
        self._model = model
        self.score_threshold = score_threshold

    @property
    def model(self) -> str:
        return self._model

    def _predict_sync(self, image: RGBImage, query: str) -> Prediction:
        detections = self.segmenter.embed(image).segment([query], self.score_threshold)[0]
        kept = detections[detections.scores >= self.score_threshold]
        if len(kept) == 0 or not kept.masks.any():
            return Prediction(status="no_mask", mask=None, extra={"masks": 0})
        return Prediction(status="masks", mask=kept.union(), extra={"masks": len(kept)})

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        # The segmenter is synchronous and heavy: keep the event loop free for other samples.
        return await asyncio.to_thread(self._predict_sync, image, query)


# --------------------------------------------------------------------------- the run


class EvalHandler:
    """Evaluates samples on one worker: predict, score against the ground truth, pack.

    The engine-neutral half of :func:`evaluate`: the local engine runs it in this process,
    the Ray engine on each actor (see :mod:`sam3_agent.runs.jobs`).
    """

    def __init__(
        self, predictor: Predictor, run_dir: Path, shared: SharedEmbeddings | None = None
    ) -> None:
        self.predictor = predictor
        self.run_dir = run_dir
        self.shared = shared

    async def run(self, job: Sample, images: ImageSource) -> SampleResult:
        return await _evaluate_one(job, images, self.predictor, self.run_dir)

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


async def evaluate(
    samples: Sequence[Sample],
    store: ResultStore,
    predictor: Predictor,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    shared: SharedEmbeddings | None = None,
    progress: ProgressListener | None = None,
    retry_failed: bool = False,
) -> RunOutcome:
    """Evaluate every sample not yet in ``store`` in this process, committing each as it finishes.

    The local engine with a predictor built by the caller; ``sam3-agent eval --engine ray``
    goes through :func:`sam3_agent.runs.jobs.driver.run_jobs` with a worker factory instead.

    Args:
        samples: the samples of this run (any order; they are run grouped by image).
        store: where results go; its stored samples are skipped.
        predictor: the agent or the SAM 3-only baseline.
        concurrency: samples in flight at once.
        shared: the segmenter wrapper the predictor uses, so an image's embedding is
            released when its last sample is done.
        progress: told about each committed sample.
        retry_failed: evaluate again the samples stored as infrastructure failures.

    Raises:
        UserError: ``concurrency`` < 1.
        DatasetError: a sample's ground truth is broken (the run stops; commits are kept).
        asyncio.CancelledError: the run was cancelled (Ctrl-C); commits are kept.
    """
    engine = LocalEngine(concurrency=concurrency)
    handler = EvalHandler(predictor, store.run_dir, shared)
    return await run_jobs(
        samples, store, engine, Prebuilt(handler), progress=progress, retry_failed=retry_failed
    )


def _rle_or_none(mask: BoolArray | None) -> dict[str, Any] | None:
    return None if mask is None or not mask.any() else encode_rle(mask)


async def _evaluate_one(
    sample: Sample, holder: ImageSource, predictor: Predictor, run_dir: Path
) -> SampleResult:
    rel_dir = Path(SAMPLES_DIR) / sample_dir_name(sample.id)
    started = time.perf_counter()
    infra_error = False
    try:
        image = await holder.get(sample.image_path, exif_orientation=sample.exif_orientation)
        prediction = await predictor.predict(image, sample.query, run_dir / rel_dir)
    except SAMPLE_FAILURES as e:
        # INFO, not WARNING: the progress bar counts failures and the report lists them.
        logger.info("sample %s failed: %s", sample.id, failure_message(e))
        prediction = Prediction(status="failed", mask=None, failure=failure_message(e))
        infra_error = True
    except BaseException as e:
        if stops_the_run(e):
            raise
        # Whatever else one sample raises must not cost the other samples their run.
        logger.warning("sample %s failed: %s", sample.id, failure_message(e), exc_info=True)
        prediction = Prediction(status="failed", mask=None, failure=failure_message(e))
        infra_error = True
    elapsed = time.perf_counter() - started
    return await asyncio.to_thread(
        _score_and_pack, sample, prediction, infra_error, elapsed, rel_dir
    )


def stops_the_run(error: BaseException) -> bool:
    """An interrupt, a cancellation or an exit, alone or inside an exception group."""
    if isinstance(error, STOPS):
        return True
    group = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+
    if group is not None and isinstance(error, group):
        return any(stops_the_run(e) for e in error.exceptions)
    return False


def failure_message(error: BaseException) -> str:
    """``"TypeName: message"`` on one line, bounded, encodable as UTF-8 whatever the error holds
    (a message with newlines, lone surrogates, or a ``__str__`` that itself raises).

    A failure record always names the error's type, a user error's too."""
    text = one_line(error, FAILURE_MESSAGE_CHARS)
    name = type(error).__name__
    return f"{name}: {text}" if isinstance(error, UserError) else text


def _score_and_pack(
    sample: Sample, prediction: Prediction, infra_error: bool, elapsed: float, rel_dir: Path
) -> SampleResult:
    gt = sample.load_gt()
    mask = prediction.mask
    if mask is not None and mask.shape != gt.image_size:
        raise DatasetError(
            f"sample {sample.id}: image {sample.image_path} is {mask.shape[0]}x{mask.shape[1]} "
            f"pixels but its ground truth is {gt.image_size[0]}x{gt.image_size[1]}"
        )
    pred = mask if mask is not None else np.zeros(gt.image_size, dtype=bool)
    score = score_mask(pred, gt.mask, gt.ignore)
    return SampleResult(
        id=sample.id,
        split=sample.split,
        tags=sample.tags,
        no_target=sample.no_target,
        image_path=str(sample.image_path),
        query=sample.query,
        status=prediction.status,
        intersection=score.intersection,
        union=score.union,
        pred_area=score.pred_area,
        gt_area=score.gt_area,
        rounds=prediction.rounds,
        prompt_tokens=prediction.prompt_tokens,
        completion_tokens=prediction.completion_tokens,
        calls=prediction.calls,
        time_s=round(elapsed, 4),
        failure=prediction.failure,
        infra_error=infra_error,
        prediction=_rle_or_none(pred),
        ground_truth=_rle_or_none(gt.mask),
        ignore=_rle_or_none(gt.ignore),
        artifacts=str(rel_dir) if prediction.artifacts is not None else None,
        extra=prediction.extra,
    )
