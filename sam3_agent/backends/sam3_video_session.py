"""One phrase's SAM 3 video session, fed the clip one frame at a time.

Streamed, yet as the whole-clip inference computes it: transformers' streaming mode
(``model(frame=...)``) switches off SAM 3's hotstart heuristics, which need later frames.
Here each frame is run as the whole-clip path runs it (``model(frame_idx=...)``) and the
outputs wait ``hotstart_delay`` frames before they are read, as
``propagate_in_video_iterator`` buffers them.

Memory flat in clip length: after each frame the session drops what the tracker will not
read again (pixels, outputs older than its memory bank and object-pointer window,
conditioning frames beyond the ``max_cond_frame_num`` most recent, past mask logits,
per-frame bookkeeping). SAM 3 takes object pointers from those conditioning frames only,
where transformers takes them from every one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Sam3VideoInferenceSession, Sam3VideoModel, Sam3VideoProcessor

from sam3_agent.media.video import VideoSource
from sam3_agent.values.tracks import TrackBuilder, Tracks


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
    will not read again; what it reads keeps its values."""
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
    """One phrase's session through one pass over the clip."""

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

    def finish(self) -> None:
        while self._pending:
            self._read(self._pending.popleft())

    def tracks(self, score_threshold: float) -> Tracks:
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
