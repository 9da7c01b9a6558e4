"""SAM 3 on video in this process, through ``transformers`` (``Sam3VideoModel`` +
``Sam3VideoProcessor``).

:meth:`Sam3VideoSegmenter.open` returns a handle whose :meth:`~Sam3VideoEmbedding.track`
follows every instance of each phrase through the clip: one inference session per phrase,
fed the frames of :meth:`VideoSource.frames` one at a time, each frame's masks RLE-encoded
into a :class:`~sam3_agent.values.tracks.TrackBuilder` at the frame's position. Several
phrases of one call share each decoded frame and one backbone run on it.

Streamed, yet as the whole-clip inference computes it. transformers' own streaming mode
(``model(frame=...)``) switches off SAM 3's hotstart heuristics (dropping tracks that
detections stop confirming, or that duplicate an earlier track, within ``hotstart_delay``
frames of their start), because they need later frames. Here each frame is added to the
session and run as the whole-clip path runs it (``model(frame_idx=...)``), and the outputs
wait in a buffer of ``hotstart_delay`` frames before they are read, exactly as
``propagate_in_video_iterator`` buffers them; a track removed in that window is hidden from
the frames already buffered. The session reports the clip's frame count, which the tracker
reads for its object-pointer window.

Memory flat in clip length. A session keeps every frame added and every frame's tracker
output; after each frame it drops what the tracker will not read again:
the frame's pixels, outputs older than its memory bank (``num_maskmem``) and object-pointer
window (``max_object_pointers_in_encoder``), conditioning frames beyond the
``max_cond_frame_num`` most recent (the ones its attention selects; SAM 3 also takes object
pointers from those only, where transformers takes them from every conditioning frame),
full-size mask logits of past frames, and per-frame bookkeeping. Live tracks keep a bounded
state each; what grows is each object's few integers of bookkeeping and the RLE tracks.

Backbone reuse. The image backbone (the ViT, most of SAM 3's cost) is wrapped so its output
for a frame is kept in a :class:`FeatureCache` bounded in bytes and keyed by the frame's
pixels: a second phrase on the same clip skips the backbone for the frames the cache holds.
transformers offers no hook for this (``_det_track_one_frame`` always calls the detector's
``get_vision_features``; the session's ``cache.cache_vision_features`` holds only the
tracker's copy of the current frame), so the segmenter replaces the detector's
``vision_encoder.backbone`` module with a caching wrapper around it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import Sam3VideoInferenceSession, Sam3VideoModel, Sam3VideoProcessor
from transformers.modeling_outputs import BaseModelOutput

from sam3_agent.backends.sam3_common import (
    DEFAULT_MODEL,
    LoadedSam3,
    fit_phrase,
    preshrink,
    torch_failures,
)
from sam3_agent.backends.segment_args import check_segment_args
from sam3_agent.media.video import Frame, VideoSource
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import image_digest
from sam3_agent.values.tracks import TrackBuilder, Tracks

__all__ = [
    "DEFAULT_FEATURE_CACHE_BYTES",
    "FeatureCache",
    "Sam3VideoEmbedding",
    "Sam3VideoSegmenter",
]

logger = logging.getLogger(__name__)

DEFAULT_FEATURE_CACHE_BYTES = 512 * 1024**2
"""Backbone features kept for reuse across phrases: 512 MiB, about 48 frames of SAM 3 at
1008 px in bfloat16 (10.6 MB a frame)."""

_OOM_HINT = "track fewer frames (`stride`, `max_frames`) or use a smaller `video_cache_mb`"


class FeatureCache:
    """The image backbone's output for video frames, bounded in bytes.

    Keys are frame content hashes; values the backbone's last hidden state on the model's
    device. Made for clips read front to back, again and again (one pass per phrase): a
    least-recently-used cache would evict each frame just before the next pass needs it,
    so when full the cache evicts only entries another clip (another ``group``) stored,
    least recently used first, and otherwise keeps what it holds: every pass then reuses
    the frames that fit.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise UserError(f"the feature cache size must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self.hits = 0
        """Lookups answered from the cache."""
        self.misses = 0
        """Lookups not answered (the backbone ran)."""
        self._entries: OrderedDict[Hashable, tuple[torch.Tensor, Hashable]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def get(self, key: Hashable, group: Hashable) -> torch.Tensor | None:
        """The features stored under ``key`` (now counted as ``group``'s), or None."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries[key] = (entry[0], group)
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, value: torch.Tensor, group: Hashable) -> bool:
        """Store ``value`` unless it cannot fit without evicting ``group``'s own entries."""
        size = value.element_size() * value.nelement()
        if key in self._entries or size > self.max_bytes:
            return False
        while self._bytes + size > self.max_bytes:
            other = next((k for k, (_, g) in self._entries.items() if g != group), None)
            if other is None:
                return False
            evicted, _ = self._entries.pop(other)
            self._bytes -= evicted.element_size() * evicted.nelement()
        self._entries[key] = (value, group)
        self._bytes += size
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0


class _CachingBackbone(torch.nn.Module):
    """The detector's ViT backbone, answering from a :class:`FeatureCache` where it can.

    Inside :meth:`frame`, a call returns the stored output for that frame if there is one
    (the latest frame's is always at hand, for phrases tracked in lockstep) and stores a
    new one; outside, it runs the ViT.
    """

    def __init__(self, inner: torch.nn.Module, cache: FeatureCache) -> None:
        super().__init__()
        self.inner = inner
        self.cache = cache
        self.runs = 0
        """Times the ViT ran."""
        self._frame: tuple[Hashable, Hashable] | None = None
        self._latest: tuple[Hashable, torch.Tensor] | None = None

    @contextmanager
    def frame(self, key: Hashable, group: Hashable) -> Iterator[None]:
        self._frame = (key, group)
        try:
            yield
        finally:
            self._frame = None

    def forget_latest(self) -> None:
        self._latest = None

    def forward(self, pixel_values: torch.Tensor, **kwargs: Any) -> Any:
        frame = self._frame
        if frame is not None:
            key, group = frame
            if self._latest is not None and self._latest[0] == key:
                return BaseModelOutput(last_hidden_state=self._latest[1])
            cached = self.cache.get(key, group) if self.cache.max_bytes else None
            if cached is not None:
                self._latest = (key, cached)
                return BaseModelOutput(last_hidden_state=cached)
        out = self.inner(pixel_values, **kwargs)
        self.runs += 1
        if frame is not None:
            self._latest = (frame[0], out.last_hidden_state)
            if self.cache.max_bytes:
                self.cache.put(frame[0], out.last_hidden_state, frame[1])
        return out


def _install_backbone(model: Sam3VideoModel, cache: FeatureCache) -> _CachingBackbone:
    vision: Any = model.detector_model.vision_encoder
    inner = vision.backbone
    if isinstance(inner, _CachingBackbone):  # a second segmenter on the same model object
        inner = inner.inner
    wrapper = _CachingBackbone(inner, cache)
    vision.backbone = wrapper
    return wrapper


class _StreamingSession(Sam3VideoInferenceSession):
    """A session fed one frame at a time that reports the whole clip's frame count (the
    tracker sizes its object-pointer window by it, as it does for a pre-loaded clip)."""

    def __init__(self, frame_count: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._frame_count = frame_count

    @property
    def num_frames(self) -> int:
        return self._frame_count


@dataclass(frozen=True)
class _Windows:
    """How far back the model reads a session's state (from its config)."""

    memory_frames: int
    """Past frames whose tracker outputs the next frame reads (memory bank, pointers)."""
    cond_frames: int
    """Conditioning frames per object its attention selects (-1: all)."""
    unmatched: int
    """Unmatched frames that make a young track removable (only the count is read)."""
    duplicates: int
    """Overlapping frames that make a young track a duplicate (only the count is read)."""
    hotstart_delay: int
    """Frames an output waits before it is read."""

    @classmethod
    def of(cls, model: Sam3VideoModel) -> _Windows:
        tracker: Any = model.tracker_model.config
        return cls(
            memory_frames=max(int(tracker.num_maskmem), int(tracker.max_object_pointers_in_encoder))
            - 1,
            cond_frames=int(tracker.max_cond_frame_num),
            unmatched=int(model.hotstart_unmatch_thresh),
            duplicates=int(model.hotstart_dup_thresh),
            hotstart_delay=int(model.hotstart_delay),
        )


_PAST_FRAME_KEYS = ("pred_masks", "high_res_masks")
"""Tracker outputs read only on their own frame (the memory bank reads ``maskmem_*`` and
``object_pointer``)."""


def _trim_session(session: Sam3VideoInferenceSession, position: int, windows: _Windows) -> None:
    """Drop from ``session``, after frame ``position`` was run and read, everything the model
    will not read again (see the module docstring); what it reads keeps its values."""
    if session.processed_frames:
        session.processed_frames.clear()
    oldest = position + 1 - windows.memory_frames
    for outputs in session.output_dict_per_obj.values():
        kept = outputs["non_cond_frame_outputs"]
        for f in [f for f in kept if f < oldest]:
            del kept[f]
        cond = outputs["cond_frame_outputs"]
        if windows.cond_frames >= 0:
            recent = set(sorted(cond)[-windows.cond_frames :]) if windows.cond_frames else set()
            for f in [f for f in cond if f < oldest and f not in recent]:
                del cond[f]
        for store in (kept, cond):
            for f, out in store.items():
                if f <= position:
                    for key in _PAST_FRAME_KEYS:
                        out.pop(key, None)
    for per_object in (
        session.frames_tracked_per_obj,
        session.mask_inputs_per_obj,
        session.point_inputs_per_obj,
    ):
        for frames in per_object.values():
            for f in [f for f in frames if f <= position]:
                del frames[f]
    for per_frame in (session.obj_id_to_tracker_score_frame_wise, session.suppressed_obj_ids):
        for f in [f for f in per_frame if f <= position]:
            del per_frame[f]
    for lists, keep in (
        (session.unmatched_frame_inds, windows.unmatched),
        (session.overlap_pair_to_frame_inds, windows.duplicates),
    ):
        for frames in lists.values():
            if len(frames) > max(keep, 1):
                del frames[: len(frames) - max(keep, 1)]


class _PhraseRun:
    """One phrase's session through one pass over the clip."""

    def __init__(self, owner: Sam3VideoSegmenter, video: VideoSource, phrase: str) -> None:
        self._owner = owner
        height, width = video.size
        device = owner.device
        self.session = _StreamingSession(
            video.frame_count,
            video_height=height,
            video_width=width,
            inference_device=device,
            inference_state_device=device,
            video_storage_device=device,
            dtype=owner.dtype,
        )
        owner._processor.add_text_prompt(self.session, phrase)
        self._builder = TrackBuilder(video.frame_count, video.size)
        self._pending: deque[Any] = deque()

    def step(self, position: int, pixel_values: torch.Tensor) -> None:
        """Run one frame; read the outputs whose hotstart wait is over; trim the session."""
        owner, session = self._owner, self.session
        session.add_new_frame(pixel_values, frame_idx=position)
        out = owner._model(inference_session=session, frame_idx=position)
        delay = owner._windows.hotstart_delay
        if delay > 0:
            session.hotstart_removed_obj_ids.update(out.removed_obj_ids)
        self._pending.append(out)
        while len(self._pending) >= max(delay, 1):
            self._read(self._pending.popleft())
        _trim_session(session, position, owner._windows)

    def finish(self) -> None:
        """Read every output still waiting (the clip has ended)."""
        while self._pending:
            self._read(self._pending.popleft())

    def tracks(self, score_threshold: float) -> Tracks:
        built = self._builder.build()
        kept = tuple(t for t in built if t.score >= score_threshold)
        return Tracks(built.frame_count, built.size, kept)

    def _read(self, out: Any) -> None:
        found = self._owner._processor.postprocess_outputs(self.session, out)
        self._builder.add(
            int(out.frame_idx),
            [int(i) for i in found["object_ids"].tolist()],
            found["masks"].cpu().numpy(),
            [float(s) for s in found["scores"].tolist()],
        )


class Sam3VideoEmbedding:
    """One video opened for tracking; track any number of phrases through it.

    Implements :class:`sam3_agent.backends.base.VideoEmbedding`. Holds no frames: each
    :meth:`track` decodes the clip again (the segmenter's feature cache spares the backbone).
    """

    def __init__(self, owner: Sam3VideoSegmenter, video: VideoSource, group: int) -> None:
        self._owner = owner
        self._video = video
        self._group = group

    @property
    def video(self) -> VideoSource:
        """The video, with the frames tracked (:attr:`VideoSource.indices`)."""
        return self._video

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        """One :class:`Tracks` per phrase, in order, keeping tracks scoring
        ``>= score_threshold``.

        Masks are at the video's resolution, keyed by frame position; a track's score is
        SAM 3's detection score of the object (in ``[0, 1]``), its id the session's object
        id, tracks ordered by id.

        Raises:
            UserError: a phrase refused by :func:`~sam3_agent.backends.segment_args.phrase_problem`
                or a threshold outside ``[0, 1]``.
            SegmenterError: the model failed (e.g. out of memory).
            VideoLoadError: a frame became unreadable.
        """
        return self._owner._track(self._video, self._group, phrases, score_threshold)

    def used_phrase(self, phrase: str) -> str:
        """``phrase`` as SAM 3 reads it: the text cut to the text encoder's token limit."""
        return self._owner.used_phrase(phrase)


class Sam3VideoSegmenter(LoadedSam3[Sam3VideoModel, Sam3VideoProcessor]):
    """SAM 3's video model in this process; implements
    :class:`sam3_agent.backends.base.VideoSegmenter`.

    Thread-safe: one lock serialises model work (one clip pass already uses every core or
    the whole GPU).
    """

    def __init__(
        self,
        model: Sam3VideoModel,
        processor: Sam3VideoProcessor,
        *,
        device: str | torch.device | None = None,
        feature_cache_bytes: int = DEFAULT_FEATURE_CACHE_BYTES,
        name: str = "",
    ) -> None:
        """Wrap a loaded model and processor (``name``: where the weights came from, as
        :meth:`describe` reports it).

        Args:
            model: a ``Sam3VideoModel``; moved to ``device``, put in eval mode, dtype kept.
                Its detector's backbone module is replaced by a caching wrapper around it.
            processor: the matching ``Sam3VideoProcessor``.
            device: where to run; ``None`` keeps the model where it is.
            feature_cache_bytes: bytes of backbone features kept for reuse across phrases
                (:class:`FeatureCache`); 0 recomputes every frame for every call.
        """
        _check_cache_bytes(feature_cache_bytes)
        detector: Any = model.config.detector_config
        self._adopt(model, processor, device, name, getattr(detector, "text_config", None))
        self._windows = _Windows.of(model)
        self._cache = FeatureCache(feature_cache_bytes)
        self._backbone = _install_backbone(model, self._cache)
        self._lock = threading.Lock()
        self._groups = itertools.count()
        self._calls = itertools.count()

    @classmethod
    def from_pretrained(
        cls,
        model: str | Path = DEFAULT_MODEL,
        *,
        device: str = "auto",
        dtype: str = "auto",
        feature_cache_bytes: int = DEFAULT_FEATURE_CACHE_BYTES,
    ) -> Sam3VideoSegmenter:
        """Load SAM 3's video model from a hub id (default ``facebook/sam3``, which holds it)
        or a local directory.

        ``device``: ``auto`` (CUDA if present, else CPU), ``cpu``, ``cuda``, ``cuda:N``.
        ``dtype``: ``auto`` (bfloat16 on CUDA and on CPUs that compute it natively, float32
        elsewhere), ``float32``, ``bfloat16``, ``float16``.

        Raises:
            WeightsUnavailableError: weights missing, gated, or offline; says what to do.
            UserError: bad device, dtype or cache size.
        """
        _check_cache_bytes(feature_cache_bytes)
        return cls._load(
            model,
            Sam3VideoModel,
            Sam3VideoProcessor,
            device=device,
            dtype=dtype,
            feature_cache_bytes=feature_cache_bytes,
        )

    @property
    def feature_cache(self) -> FeatureCache:
        """The backbone features kept across calls (size, hits and misses)."""
        return self._cache

    @property
    def backbone_runs(self) -> int:
        """Times the image backbone ran since this segmenter was made."""
        return self._backbone.runs

    def used_phrase(self, phrase: str) -> str:
        """``phrase`` as the text encoder reads it (see
        :func:`~sam3_agent.backends.sam3_common.fit_phrase`)."""
        with self._lock, torch_failures("tokenizer", self._device, _OOM_HINT):
            return fit_phrase(self._processor.tokenizer, phrase, self._text_limit)

    def open(self, video: VideoSource) -> Sam3VideoEmbedding:
        """Prepare ``video`` for tracking; nothing is decoded until :meth:`track`.

        Raises:
            UserError: ``video`` is not a :class:`VideoSource` (use ``open_video``).
        """
        if not isinstance(video, VideoSource):
            raise UserError(
                f"open needs a VideoSource (see open_video), got {type(video).__name__}"
            )
        return Sam3VideoEmbedding(self, video, next(self._groups))

    def _track(
        self, video: VideoSource, group: int, phrases: Sequence[str], score_threshold: float
    ) -> list[Tracks]:
        check_segment_args(phrases, score_threshold)
        if not phrases:
            return []
        call = next(self._calls)
        with self._lock:
            with torch_failures("tokenizer", self._device, _OOM_HINT):
                read = [fit_phrase(self._processor.tokenizer, p, self._text_limit) for p in phrases]
            try:
                with torch_failures("video tracker", self._device, _OOM_HINT):
                    runs = [_PhraseRun(self, video, phrase) for phrase in read]
                    for frame in video.frames():
                        pixel_values = self._pixel_values(frame)
                        key = self._frame_key(frame, call)
                        with self._backbone.frame(key, group):
                            for run in runs:
                                run.step(frame.position, pixel_values)
                    for run in runs:
                        run.finish()
                    return [run.tracks(score_threshold) for run in runs]
            finally:
                self._backbone.forget_latest()

    def _frame_key(self, frame: Frame, call: int) -> Hashable:
        """The frame's content hash when features are cached across calls; else a key
        unique to this call and frame (phrases tracked together still share the frame's)."""
        if self._cache.max_bytes:
            return image_digest(frame.pixels)
        return ("call", call, frame.position)

    def _pixel_values(self, frame: Frame) -> torch.Tensor:
        pixels = preshrink(frame.pixels, self._processor.image_processor)
        # torch warns on read-only arrays; the copy is one frame.
        pixels = pixels if pixels.flags.writeable else np.array(pixels)
        inputs = self._processor(images=pixels, return_tensors="pt")
        return inputs["pixel_values"][0].to(self._device, dtype=self._dtype)


def _check_cache_bytes(feature_cache_bytes: int) -> None:
    if feature_cache_bytes < 0:
        raise UserError(f"`feature_cache_bytes` must be >= 0, got {feature_cache_bytes}")
