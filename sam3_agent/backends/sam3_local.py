"""SAM 3 in this process (``Sam3Model``). The backbone (about 28 of 32 s per call on a CPU)
runs once per image (LRU by content hash); the handle answers any number of phrases. Masks
are thresholded at the model's resolution and only kept ones upsampled, in bands of rows."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from transformers import Sam3Model, Sam3Processor
from transformers.models.sam3.modeling_sam3 import Sam3VisionEncoderOutput

from sam3_agent.backends.lru import Lru
from sam3_agent.backends.sam3_common import LoadedSam3, PhraseHandle
from sam3_agent.backends.segment_args import check_rgb_image, check_segment_args, clean_phrase
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import RGBImage, image_digest

logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class _Features:
    """What ``Sam3Model.forward`` needs from the backbone for one image (batch size 1)."""

    fpn_hidden_states: tuple[torch.Tensor, ...]
    fpn_position_encoding: tuple[torch.Tensor, ...]


class Sam3Embedding(PhraseHandle):
    """One image with its backbone features; holds them itself, so it stays valid after the
    segmenter's cache evicts them."""

    _owner: Sam3Segmenter

    def __init__(
        self, owner: Sam3Segmenter, digest: str, image_size: tuple[int, int], features: _Features
    ) -> None:
        self._owner = owner
        self._features = features
        self.digest = digest
        self.image_size = image_size

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        """Detections scoring ``> score_threshold``; a score is detection times presence
        score, in the model's query order; ``exemplars`` go with each phrase."""
        check_segment_args(phrases, score_threshold)
        # The one sanitiser, as the service applies it: both paths read the same text.
        cleaned = [clean_phrase(p) for p in phrases]
        step = self._owner._max_phrase_batch
        results: list[Detections] = []
        for start in range(0, len(cleaned), step):
            chunk = cleaned[start : start + step]
            results.extend(self._owner._segment_batch(self, chunk, score_threshold, exemplars))
        return results


class Sam3Segmenter(LoadedSam3[Sam3Model, Sam3Processor]):
    """SAM 3 in this process. One lock serialises model work (the tokenizer is not
    thread-safe, and one forward already uses every core or the whole GPU)."""

    _classes = (Sam3Model, Sam3Processor)
    _oom_hint = "use a smaller `sam3_cache_size`, fewer phrases per call"

    def __init__(
        self,
        model: Sam3Model,
        processor: Sam3Processor,
        *,
        device: str | torch.device | None = None,
        cache_size: int = 8,
        max_phrase_batch: int = 16,
        mask_threshold: float = 0.5,
        name: str | None = None,
    ) -> None:
        """``cache_size``: images whose backbone features are kept (LRU; 0: none);
        ``max_phrase_batch``: phrases per forward; ``mask_threshold``: the probability above
        which a mask pixel is on."""
        self._check_options(cache_size=cache_size, max_phrase_batch=max_phrase_batch)
        self._adopt(model, processor, device, name, getattr(model.config, "text_config", None))
        self._max_phrase_batch = max_phrase_batch
        self._mask_threshold = mask_threshold
        self._model_lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()
        self._cache_lock = threading.Lock()  # for _pending
        self._cache: Lru[str, _Features] = Lru(cache_size)
        self._pending: dict[str, Future[_Features]] = {}

    @classmethod
    def _check_options(cls, *, cache_size: int = 8, max_phrase_batch: int = 16, **_: Any) -> None:
        if cache_size < 0:
            raise UserError(f"cache_size must be >= 0, got {cache_size}")
        if max_phrase_batch < 1:
            raise UserError(f"max_phrase_batch must be >= 1, got {max_phrase_batch}")

    @property
    def cached_images(self) -> list[str]:
        """Least recently used first."""
        return self._cache.keys()

    def _tokenize(self, phrases: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded and cut to the encoder's limit: ``Sam3Processor`` never truncates, so a
        longer phrase made the text encoder raise."""
        with self._tokenizer_lock:
            text = self._processor.tokenizer(
                phrases,
                padding="max_length",
                max_length=self.text_limit,
                truncation=True,
                return_tensors="pt",
            )
        return text["input_ids"], text["attention_mask"]

    def embed(self, image: RGBImage) -> Sam3Embedding:
        """Backbone features of an ``(H, W, 3)`` uint8 RGB image, from the cache if there."""
        check_rgb_image(image)
        digest = image_digest(image)
        size = (int(image.shape[0]), int(image.shape[1]))
        return Sam3Embedding(self, digest, size, self._features_for(digest, image))

    def _features_for(self, digest: str, image: RGBImage) -> _Features:
        with self._cache_lock:
            cached = self._cache.get(digest)
            if cached is not None:
                logger.debug("backbone cache hit %s", digest[:12])
                return cached
            pending = self._pending.get(digest)
            computing = pending is None
            if pending is None:
                pending = Future()
                self._pending[digest] = pending
        if not computing:
            return pending.result()
        try:
            features = self._compute_features(image)
        except BaseException as e:
            pending.set_exception(e)
            with self._cache_lock:
                del self._pending[digest]
            raise
        with self._cache_lock:
            del self._pending[digest]
            if self._cache.size > 0:
                for evicted, _ in self._cache.put(digest, features):
                    logger.debug("backbone cache evicted %s", evicted[:12])
        pending.set_result(features)
        return features

    def _compute_features(self, image: RGBImage) -> _Features:
        logger.debug("running the SAM 3 backbone on a %dx%d image", image.shape[1], image.shape[0])
        with self._model_work("image backbone"):
            out = self._model.get_vision_features(pixel_values=self._pixel_values(image))
            # Keep only what forward() reads; the ViT's last hidden state is not needed again.
            return _Features(
                fpn_hidden_states=tuple(out.fpn_hidden_states),
                fpn_position_encoding=tuple(out.fpn_position_encoding),
            )

    def _boxes(
        self, exemplars: Exemplars, image_size: tuple[int, int], batch: int
    ) -> dict[str, torch.Tensor]:
        """``exemplars`` as ``forward``'s ``input_boxes`` (cxcywh in ``[0, 1]``, the
        processor's normalisation) and ``input_boxes_labels``, one copy per phrase."""
        with self._tokenizer_lock:  # the processor also tokenises its placeholder text
            encoded = self._processor(
                input_boxes=[[[float(v) for v in box] for box in exemplars.boxes]],
                input_boxes_labels=[[int(p) for p in exemplars.positive]],
                original_sizes=[list(image_size)],
                return_tensors="pt",
            )
        boxes, labels = encoded["input_boxes"], encoded["input_boxes_labels"]
        return {
            "input_boxes": boxes.expand(batch, *boxes.shape[1:]).to(self.device, self.dtype),
            "input_boxes_labels": labels.expand(batch, *labels.shape[1:]).to(self.device),
        }

    def _segment_batch(
        self,
        embedding: Sam3Embedding,
        phrases: list[str],
        score_threshold: float,
        exemplars: Exemplars | None = None,
    ) -> list[Detections]:
        features, image_size = embedding._features, embedding.image_size
        batch = len(phrases)
        with self._model_work("phrase decoder"):
            input_ids, attention_mask = self._tokenize(phrases)
            vision = Sam3VisionEncoderOutput(
                fpn_hidden_states=_expand(features.fpn_hidden_states, batch),
                fpn_position_encoding=_expand(features.fpn_position_encoding, batch),
            )
            boxes = self._boxes(exemplars, image_size, batch) if exemplars else {}
            out = self._model(
                vision_embeds=vision,
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                **boxes,
            )
            # Post-process in float32: bfloat16 sigmoid/interpolation shifts mask edges.
            scores = out.pred_logits.float().sigmoid()
            if out.presence_logits is not None:
                scores = scores * out.presence_logits.float().sigmoid()
            return [
                detections_at(
                    scores[b],
                    out.pred_boxes[b],
                    out.pred_masks[b],
                    image_size,
                    score_threshold,
                    self._mask_threshold,
                )
                for b in range(batch)
            ]

    @contextmanager
    def _model_work(self, stage: str) -> Iterator[None]:
        with self._model_lock, self._failures(stage), torch.inference_mode():
            yield


def _expand(tensors: tuple[torch.Tensor, ...], batch: int) -> tuple[torch.Tensor, ...]:
    """Repeat batch-1 feature maps along the batch axis (a view, no copy)."""
    return tuple(t.expand(batch, *t.shape[1:]) for t in tensors)


def detections_at(
    scores: torch.Tensor,
    boxes: torch.Tensor,
    mask_logits: torch.Tensor,
    image_size: tuple[int, int],
    score_threshold: float,
    mask_threshold: float,
) -> Detections:
    """``Sam3Processor.post_process_instance_segmentation``, resizing only kept queries,
    dropping masks already empty at model resolution. ``scores`` ``(Q,)`` detection x
    presence; ``boxes`` ``(Q, 4)`` XYXY in ``[0, 1]``; ``mask_logits`` ``(Q, h, w)``."""
    height, width = image_size
    keep = scores > score_threshold
    if bool(keep.any()):
        probs = mask_logits[keep].float().sigmoid()  # (K, h, w): small
        keep_idx = keep.nonzero().flatten()
        lit = probs.flatten(1).amax(dim=1) > mask_threshold
        keep_idx, probs = keep_idx[lit], probs[lit]
    else:
        keep_idx = keep.nonzero().flatten()
    if keep_idx.numel() == 0:
        return Detections.empty(height, width)
    scale = torch.tensor([width, height, width, height], dtype=torch.float32)
    kept_boxes = (boxes[keep_idx].float().cpu() * scale).numpy()
    np.clip(kept_boxes[:, 0::2], 0, width, out=kept_boxes[:, 0::2])
    np.clip(kept_boxes[:, 1::2], 0, height, out=kept_boxes[:, 1::2])
    return Detections(
        masks=upsample_masks(probs.cpu(), image_size, mask_threshold),
        boxes=kept_boxes,
        scores=scores[keep_idx].float().cpu().numpy(),
    )


def upsample_masks(
    probs: torch.Tensor, image_size: tuple[int, int], threshold: float
) -> npt.NDArray[np.bool_]:
    """``(K, h, w)`` probabilities -> ``(K, H, W)`` bool, ``bilinear(probs) > threshold``
    (``align_corners=False``), computed separably, the height pass a band of rows at a time,
    so no ``H x W`` float array ever exists."""
    height, width = image_size
    count, h, _ = probs.shape
    out = np.empty((count, height, width), dtype=np.bool_)
    out_t = torch.from_numpy(out)
    y0, y1, wy = _source_rows(h, height)
    band = max(1, _BAND_FLOATS // max(1, width))
    for i in range(count):
        rows = F.interpolate(
            probs[i][None, None], size=(h, width), mode="bilinear", align_corners=False
        )[0, 0]
        for top in range(0, height, band):
            sl = slice(top, min(height, top + band))
            lam = wy[sl, None]
            # (1 - lam) * upper + lam * lower, in place: two band buffers at a time.
            values = rows.index_select(0, y0[sl]).mul_(1.0 - lam)
            values.add_(rows.index_select(0, y1[sl]).mul_(lam))
            torch.gt(values, threshold, out=out_t[i, sl])
    return out


# Rows per band of the height pass: two buffers of about 4 MB of float32.
_BAND_FLOATS = 1_000_000


def _source_rows(size_in: int, size_out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch's ``align_corners=False`` source rows and weights for a linear resize."""
    scale = torch.tensor(size_in / size_out, dtype=torch.float32)
    dst = torch.arange(size_out, dtype=torch.float32)
    src = torch.clamp(scale * (dst + 0.5) - 0.5, min=0.0)
    y0 = src.to(torch.int64)
    y1 = torch.clamp(y0 + 1, max=size_in - 1)
    return y0, y1, (src - y0.to(torch.float32))
