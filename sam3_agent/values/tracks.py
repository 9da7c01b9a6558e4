"""Mask tracks: one object followed through the frames of a video, its masks as COCO RLE
keyed by the frame's *position* among the frames used (a 500-frame 4K track stays a few
hundred KB). :class:`Tracks` is the video counterpart of ``Detections``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent.values.detections import tight_boxes
from sam3_agent.values.rle import (
    BoolArray,
    decode_rle,
    encode_rle,
    rle_area,
    rle_intersection_area,
    rle_union,
)

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Track:
    track_id: int
    """The segmenter's object id (stable within one phrase's result)."""

    score: float
    """The object's detection score (mean over the frames it appears in)."""

    masks: Mapping[int, dict[str, Any]]
    """Frame position -> COCO RLE ``{"size": [H, W], "counts": str}``; only frames where
    the mask is non-empty."""

    boxes: Mapping[int, Box] = field(default_factory=dict)
    """Frame position -> tight XYXY box in pixels (exclusive ``x2``/``y2``)."""

    @property
    def positions(self) -> list[int]:
        return sorted(self.masks)

    @property
    def extent(self) -> tuple[int, int] | None:
        if not self.masks:
            return None
        return min(self.masks), max(self.masks)

    def mask(self, position: int) -> BoolArray | None:
        rle = self.masks.get(position)
        return None if rle is None else decode_rle(rle)

    def area(self, position: int) -> int:
        rle = self.masks.get(position)
        return 0 if rle is None else rle_area(rle)

    def total_area(self) -> int:
        return sum(self.area(p) for p in self.masks)

    def to_json(self) -> dict[str, Any]:
        return {
            "track_id": self.track_id,
            "score": self.score,
            "masks": {str(p): rle for p, rle in sorted(self.masks.items())},
            "boxes": {str(p): list(b) for p, b in sorted(self.boxes.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Track:
        return cls(
            track_id=int(data["track_id"]),
            score=float(data["score"]),
            masks={int(p): dict(rle) for p, rle in data["masks"].items()},
            boxes={int(p): _box(b) for p, b in data.get("boxes", {}).items()},
        )


@dataclass(frozen=True)
class Tracks:
    """The tracks one phrase found in a video (or a selection of them), in number order."""

    frame_count: int
    """Frames the session uses; positions run ``0..frame_count-1``."""

    size: tuple[int, int]
    """``(height, width)`` of every mask."""

    tracks: tuple[Track, ...] = ()

    def __len__(self) -> int:
        return len(self.tracks)

    def __iter__(self) -> Iterator[Track]:
        return iter(self.tracks)

    def __getitem__(self, index: int) -> Track:
        return self.tracks[index]

    def select(self, indices: Sequence[int]) -> Tracks:
        return Tracks(self.frame_count, self.size, tuple(self.tracks[i] for i in indices))

    def positions(self) -> list[int]:
        return sorted({p for t in self.tracks for p in t.masks})

    def union_mask(self, position: int) -> BoolArray:
        rles = [t.masks[position] for t in self.tracks if position in t.masks]
        if not rles:
            return np.zeros(self.size, dtype=bool)
        return rle_union(rles)

    def youtube_vis(self) -> list[dict[str, Any]]:
        """Per track: id, score and one segmentation per frame used (None where absent)."""
        return [
            {
                "track_id": t.track_id,
                "score": t.score,
                "segmentations": [t.masks.get(p) for p in range(self.frame_count)],
                "extent": list(t.extent) if t.extent else None,
            }
            for t in self.tracks
        ]

    def to_state(self) -> dict[str, Any]:
        """The checkpoint's form: :meth:`to_json` under ``"tracks"``."""
        return {"tracks": self.to_json()}

    def to_json(self) -> dict[str, Any]:
        return {
            "frame_count": self.frame_count,
            "size": list(self.size),
            "tracks": [t.to_json() for t in self.tracks],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tracks:
        size = data["size"]
        return cls(
            frame_count=int(data["frame_count"]),
            size=(int(size[0]), int(size[1])),
            tracks=tuple(Track.from_json(t) for t in data["tracks"]),
        )


class TrackBuilder:
    """Collects one phrase's per-frame masks into :class:`Tracks`, RLE-encoding each frame's
    as they arrive so no full-size mask outlives the call that added it."""

    def __init__(self, frame_count: int, size: tuple[int, int]) -> None:
        self.frame_count = frame_count
        self.size = size
        self._masks: dict[int, dict[int, dict[str, Any]]] = {}
        self._boxes: dict[int, dict[int, Box]] = {}
        self._scores: dict[int, list[float]] = {}

    def add(
        self, position: int, object_ids: Sequence[int], masks: BoolArray, scores: Sequence[float]
    ) -> None:
        if masks.shape[0] != len(object_ids) or len(scores) != len(object_ids):
            raise ValueError("object_ids, masks and scores must have one entry per object")
        if len(object_ids) and masks.shape[1:] != self.size:
            raise ValueError(f"masks are {masks.shape[1:]}, the video is {self.size}")
        boxes = tight_boxes(masks) if len(object_ids) else np.zeros((0, 4), np.float32)
        for row, object_id in enumerate(object_ids):
            if boxes[row, 2] <= boxes[row, 0]:
                continue  # empty at this frame: absent
            oid = int(object_id)
            self._masks.setdefault(oid, {})[position] = encode_rle(masks[row])
            self._boxes.setdefault(oid, {})[position] = _box(boxes[row])
            self._scores.setdefault(oid, []).append(float(scores[row]))

    def build(self) -> Tracks:
        tracks = tuple(
            Track(oid, float(np.mean(self._scores[oid])), self._masks[oid], self._boxes[oid])
            for oid in sorted(self._masks)
        )
        return Tracks(self.frame_count, self.size, tracks)


def postprocess_tracks(
    tracks: Tracks,
    *,
    score_threshold: float = 0.5,
    overlap_threshold: float = 0.3,
) -> Tracks:
    """The image agent's post-processing carried to tracks; overlap is the summed
    intersection over the smaller track's summed area, over all frames."""
    if not 0.0 <= overlap_threshold <= 1.0:
        raise ValueError(f"overlap_threshold must be in [0, 1], got {overlap_threshold}")
    candidates = [t for t in tracks if t.score >= score_threshold and t.masks]
    candidates.sort(key=lambda t: -t.score)
    kept: list[Track] = []
    areas: dict[int, int] = {}
    for track in candidates:
        area = track.total_area()
        duplicate = any(
            _intersection(track, other) > overlap_threshold * min(area, areas[id(other)])
            for other in kept
        )
        if not duplicate:
            kept.append(track)
            areas[id(track)] = area
    return Tracks(tracks.frame_count, tracks.size, tuple(kept))


def _intersection(a: Track, b: Track) -> int:
    return sum(
        rle_intersection_area(a.masks[position], b.masks[position])
        for position in a.masks.keys() & b.masks.keys()
    )


def _box(values: Any) -> Box:
    x0, y0, x1, y1 = (float(v) for v in values)
    return (x0, y0, x1, y1)
