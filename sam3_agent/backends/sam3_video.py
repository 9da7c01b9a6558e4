"""SAM 3 on video in this process, through ``transformers`` (``Sam3VideoModel``).

:meth:`Sam3VideoEmbedding.track` runs one inference session per phrase
(:mod:`~sam3_agent.backends.sam3_video_session`), the phrases of one call sharing each
decoded frame and one backbone run on it.

transformers offers no hook to reuse the image backbone (most of SAM 3's cost) across
phrases: ``_det_track_one_frame`` always calls ``get_vision_features``, and the session's
cache holds only the tracker's current frame. So the segmenter replaces the detector's
``vision_encoder.backbone`` with a wrapper answering from a :class:`FeatureCache`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from transformers import Sam3VideoModel, Sam3VideoProcessor
from transformers.modeling_outputs import BaseModelOutput

from sam3_agent.backends.sam3_common import LoadedSam3, PhraseHandle
from sam3_agent.backends.sam3_video_session import PhraseRun, Windows
from sam3_agent.backends.segment_args import check_segment_args
from sam3_agent.media.video import Frame, VideoSource
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import image_digest
from sam3_agent.values.tracks import Tracks

logger = logging.getLogger(__name__)

DEFAULT_FEATURE_CACHE_BYTES = 512 * 1024**2
"""Backbone features kept for reuse across phrases: 512 MiB, about 48 frames of SAM 3 at
1008 px in bfloat16 (10.6 MB a frame)."""


class FeatureCache:
    """The image backbone's output for video frames, keyed by content hash, bounded in bytes.

    Clips are read front to back once per phrase, so plain LRU would evict each frame just
    before the next pass needs it; when full, this evicts only other clips' (other
    ``group``'s) entries, least recently used first, and otherwise keeps what it holds.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise UserError(f"the feature cache size must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
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
    """The detector's ViT backbone, answering from a :class:`FeatureCache` inside
    :meth:`frame` (the latest frame's output always at hand, for phrases in lockstep)."""

    def __init__(self, inner: torch.nn.Module, cache: FeatureCache) -> None:
        super().__init__()
        self.inner = inner
        self.cache = cache
        self.runs = 0
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


class Sam3VideoEmbedding(PhraseHandle):
    """A :class:`~sam3_agent.backends.base.VideoEmbedding` holding no frames: each
    :meth:`track` decodes the clip again (the feature cache spares the backbone)."""

    _owner: Sam3VideoSegmenter

    def __init__(self, owner: Sam3VideoSegmenter, video: VideoSource, group: int) -> None:
        self._owner = owner
        self._video = video
        self._group = group

    @property
    def video(self) -> VideoSource:
        return self._video

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        """Tracks scoring ``>= score_threshold``; a track's score is SAM 3's detection score
        of the object, its id the session's object id, tracks ordered by id."""
        return self._owner._track(self._video, self._group, phrases, score_threshold)


class Sam3VideoSegmenter(LoadedSam3[Sam3VideoModel, Sam3VideoProcessor]):
    """SAM 3's video model in this process. One lock serialises model work and the
    tokenizer (one clip pass already uses every core or the whole GPU)."""

    _oom_hint = "track fewer frames (`stride`, `max_frames`) or use a smaller `video_cache_mb`"

    def __init__(
        self,
        model: Sam3VideoModel,
        processor: Sam3VideoProcessor,
        *,
        device: str | torch.device | None = None,
        feature_cache_bytes: int = DEFAULT_FEATURE_CACHE_BYTES,
        name: str = "",
    ) -> None:
        """``model`` is moved to ``device`` (``None``: kept) and its detector's backbone
        replaced by a caching wrapper; ``name`` is where the weights came from."""
        self._check_options(feature_cache_bytes=feature_cache_bytes)
        detector: Any = model.config.detector_config
        self._adopt(model, processor, device, name, getattr(detector, "text_config", None))
        self._windows = Windows.of(model)
        self._cache = FeatureCache(feature_cache_bytes)
        self._backbone = _install_backbone(model, self._cache)
        self._lock = self._tokenizer_lock = threading.Lock()
        self._groups = itertools.count()
        self._calls = itertools.count()

    @staticmethod
    def _classes() -> tuple[type[Sam3VideoModel], type[Sam3VideoProcessor]]:
        return Sam3VideoModel, Sam3VideoProcessor

    @classmethod
    def _check_options(cls, *, feature_cache_bytes: int = 0, **_: Any) -> None:
        if feature_cache_bytes < 0:
            raise UserError(f"`feature_cache_bytes` must be >= 0, got {feature_cache_bytes}")

    @property
    def feature_cache(self) -> FeatureCache:
        return self._cache

    @property
    def backbone_runs(self) -> int:
        return self._backbone.runs

    def open(self, video: VideoSource) -> Sam3VideoEmbedding:
        """Nothing is decoded until :meth:`track`."""
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
            with self._failures("tokenizer"):
                read = [self._fit(p) for p in phrases]
            try:
                with self._failures("video tracker"):
                    runs = [
                        PhraseRun(self._model, self._processor, self._windows, video, phrase)
                        for phrase in read
                    ]
                    for frame in video.frames():
                        pixel_values = self._pixel_values(frame.pixels)[0]
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
