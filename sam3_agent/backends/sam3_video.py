"""SAM 3 on video in this process (``Sam3VideoModel``): one streamed session per phrase
(:class:`PhraseRun`), the phrases of a call sharing each decoded frame and its backbone run,
which a wrapper of the detector's backbone answers from a :class:`FeatureCache`."""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Sam3VideoInferenceSession, Sam3VideoModel, Sam3VideoProcessor
from transformers.modeling_outputs import BaseModelOutput

from sam3_agent.backends.sam3_common import LoadedSam3, PhraseHandle
from sam3_agent.backends.segment_args import check_segment_args, check_video_source
from sam3_agent.media.video import VideoSource
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import image_digest
from sam3_agent.values.tracks import TrackBuilder, Tracks

logger = logging.getLogger(__name__)

DEFAULT_FEATURE_CACHE_BYTES = 512 * 1024**2
"""Backbone features kept for reuse across phrases: 512 MiB, about 48 frames of SAM 3 at
1008 px in bfloat16 (10.6 MB a frame)."""


class StreamingSession(Sam3VideoInferenceSession):
    """A session fed one frame at a time that reports the whole clip's frame count (the
    tracker sizes its object-pointer window by it)."""

    def __init__(self, frame_count: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._frame_count = frame_count

    @property
    def num_frames(self) -> int:
        return self._frame_count


@dataclass(frozen=True)
class Windows:
    """How far back the model reads a session's state (from its config)."""

    memory_frames: int  # past frames the next frame reads (memory bank, pointers)
    cond_frames: int  # conditioning frames per object its attention selects (-1: all)
    unmatched: int  # only these counts of the hotstart lists are read
    duplicates: int
    hotstart_delay: int  # frames an output waits before it is read

    @classmethod
    def of(cls, model: Sam3VideoModel) -> Windows:
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


def trim_session(session: Sam3VideoInferenceSession, position: int, windows: Windows) -> None:
    """Drop from ``session``, after frame ``position`` was run and read, everything the model
    will not read again; what it reads keeps its values. SAM 3 takes object pointers from
    the ``max_cond_frame_num`` most recent conditioning frames only (transformers: all)."""
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


class PhraseRun:
    """One phrase's session through one pass over the clip, streamed yet as the whole-clip
    path computes it: transformers' streaming mode (``model(frame=...)``) drops SAM 3's
    hotstart heuristics, so each frame runs as ``model(frame_idx=...)`` and its outputs wait
    ``hotstart_delay`` frames before they are read, as ``propagate_in_video_iterator`` does.
    Memory stays flat: each frame is followed by :func:`trim_session`."""

    def __init__(
        self,
        model: Sam3VideoModel,
        processor: Sam3VideoProcessor,
        windows: Windows,
        video: VideoSource,
        phrase: str,
    ) -> None:
        self._model = model
        self._processor = processor
        self._windows = windows
        height, width = video.size
        first = next(model.parameters())
        device = first.device
        self.session = StreamingSession(
            video.frame_count,
            video_height=height,
            video_width=width,
            inference_device=device,
            inference_state_device=device,
            video_storage_device=device,
            dtype=first.dtype,
        )
        processor.add_text_prompt(self.session, phrase)
        self._builder = TrackBuilder(video.frame_count, video.size)
        self._pending: deque[Any] = deque()

    def step(self, position: int, pixel_values: torch.Tensor) -> None:
        session = self.session
        session.add_new_frame(pixel_values, frame_idx=position)
        out = self._model(inference_session=session, frame_idx=position)
        delay = self._windows.hotstart_delay
        if delay > 0:
            session.hotstart_removed_obj_ids.update(out.removed_obj_ids)
        self._pending.append(out)
        while len(self._pending) >= max(delay, 1):
            self._read(self._pending.popleft())
        trim_session(session, position, self._windows)

    def tracks(self, score_threshold: float) -> Tracks:
        """Read the outputs still waiting, then the tracks scoring ``>= score_threshold``."""
        while self._pending:
            self._read(self._pending.popleft())
        built = self._builder.build()
        kept = tuple(t for t in built if t.score >= score_threshold)
        return Tracks(built.frame_count, built.size, kept)

    def _read(self, out: Any) -> None:
        found = self._processor.postprocess_outputs(self.session, out)
        self._builder.add(
            int(out.frame_idx),
            [int(i) for i in found["object_ids"].tolist()],
            found["masks"].cpu().numpy(),
            [float(s) for s in found["scores"].tolist()],
        )


class FeatureCache:
    """The backbone's output for video frames by content hash, bounded in bytes. A clip is
    read front to back once per phrase, so LRU would evict each frame just before the next
    pass needs it: when full, this evicts only other ``group``'s entries (LRU first)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise UserError(f"the feature cache size must be >= 0 bytes, got {max_bytes}")
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, tuple[torch.Tensor, Hashable]] = OrderedDict()
        self.bytes_used = 0

    def __len__(self) -> int:
        return len(self._entries)

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
        while self.bytes_used + size > self.max_bytes:
            other = next((k for k, (_, g) in self._entries.items() if g != group), None)
            if other is None:
                return False
            evicted, _ = self._entries.pop(other)
            self.bytes_used -= evicted.element_size() * evicted.nelement()
        self._entries[key] = (value, group)
        self.bytes_used += size
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.bytes_used = 0


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


class Sam3VideoEmbedding(PhraseHandle):
    """A :class:`~sam3_agent.backends.base.VideoEmbedding` holding no frames: each
    :meth:`track` decodes the clip again (the feature cache spares the backbone)."""

    _owner: Sam3VideoSegmenter

    def __init__(self, owner: Sam3VideoSegmenter, video: VideoSource, group: int) -> None:
        self._owner = owner
        self.video = video
        self._group = group

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        """Tracks scoring ``>= score_threshold``; a track's score is SAM 3's detection score
        of the object, its id the session's object id, tracks ordered by id."""
        return self._owner._track(self.video, self._group, phrases, score_threshold)


class Sam3VideoSegmenter(LoadedSam3[Sam3VideoModel, Sam3VideoProcessor]):
    """SAM 3's video model in this process. One lock serialises model work and the
    tokenizer (one clip pass already uses every core or the whole GPU)."""

    _classes = (Sam3VideoModel, Sam3VideoProcessor)
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
        self.feature_cache = FeatureCache(feature_cache_bytes)
        vision: Any = model.detector_model.vision_encoder
        inner = vision.backbone
        if isinstance(inner, _CachingBackbone):  # a second segmenter on the same model object
            inner = inner.inner
        self._backbone = vision.backbone = _CachingBackbone(inner, self.feature_cache)
        self._lock = self._tokenizer_lock = threading.Lock()
        self._groups = itertools.count()
        self._calls = itertools.count()

    @classmethod
    def _check_options(cls, *, feature_cache_bytes: int = 0, **_: Any) -> None:
        if feature_cache_bytes < 0:
            raise UserError(f"`feature_cache_bytes` must be >= 0, got {feature_cache_bytes}")

    @property
    def backbone_runs(self) -> int:
        return self._backbone.runs

    def open(self, video: VideoSource) -> Sam3VideoEmbedding:
        """Nothing is decoded until :meth:`track`."""
        check_video_source(video)
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
                        # Content when features are kept across calls; else this call's.
                        cached = self.feature_cache.max_bytes
                        key = image_digest(frame.pixels) if cached else (call, frame.position)
                        with self._backbone.frame(key, group):
                            for run in runs:
                                run.step(frame.position, pixel_values)
                    return [run.tracks(score_threshold) for run in runs]
            finally:
                self._backbone._latest = None
