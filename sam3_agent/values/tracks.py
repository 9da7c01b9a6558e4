"""Mask tracks: one object through a video's frames, its masks as COCO RLE keyed by the
frame's *position* among the frames used (a 500-frame 4K track stays a few hundred KB)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sam3_agent.values import rle
from sam3_agent.values.detections import merge_same_objects, tight_boxes
from sam3_agent.values.rle import BoolArray

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Track:
    track_id: int
    """The segmenter's object id (stable within one phrase's result)."""
    score: float
    """Mean detection score over the frames the object appears in."""
    masks: Mapping[int, dict[str, Any]]
    """Frame position -> COCO RLE ``{"size": [H, W], "counts": str}``, non-empty masks only."""
    boxes: Mapping[int, Box] = field(default_factory=dict)
    """Frame position -> tight XYXY box in pixels (exclusive ``x2``/``y2``)."""

    @property
    def positions(self) -> list[int]:
        return sorted(self.masks)

    @property
    def extent(self) -> tuple[int, int] | None:
        return (min(self.masks), max(self.masks)) if self.masks else None

    def mask(self, position: int) -> BoolArray | None:
        found = self.masks.get(position)
        return None if found is None else rle.decode_rle(found)

    def area(self, position: int) -> int:
        found = self.masks.get(position)
        return 0 if found is None else rle.rle_area(found)

    def total_area(self) -> int:
        return sum(self.area(p) for p in self.masks)

    def to_json(self) -> dict[str, Any]:
        return {
            "track_id": self.track_id,
            "score": self.score,
            "masks": {str(p): m for p, m in sorted(self.masks.items())},
            "boxes": {str(p): list(b) for p, b in sorted(self.boxes.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Track:
        return cls(
            track_id=int(data["track_id"]),
            score=float(data["score"]),
            masks={int(p): dict(m) for p, m in data["masks"].items()},
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

    def merged(self, other: Tracks) -> tuple[Tracks, list[int]]:
        """:meth:`Candidates.merged <sam3_agent.values.detections.Candidates.merged>` over
        tracks, the IoU summed over frames; an added track whose id is taken gets a new one."""
        tracks = list(self.tracks)
        where = merge_same_objects(tracks, other, _track_iou, _joined, _fresh_id)
        return Tracks(self.frame_count, self.size, tuple(tracks)), where

    def positions(self) -> list[int]:
        return sorted({p for t in self.tracks for p in t.masks})

    def union_mask(self, position: int) -> BoolArray:
        rles = [t.masks[position] for t in self.tracks if position in t.masks]
        return rle.rle_union(rles) if rles else np.zeros(self.size, dtype=bool)

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
    """Collects one phrase's per-frame masks into :class:`Tracks`, RLE-encoded on arrival so
    no full-size mask outlives the call that added it."""

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
            self._masks.setdefault(oid, {})[position] = rle.encode_rle(masks[row])
            self._boxes.setdefault(oid, {})[position] = _box(boxes[row])
            self._scores.setdefault(oid, []).append(float(scores[row]))

    def build(self) -> Tracks:
        tracks = tuple(
            Track(oid, float(np.mean(self._scores[oid])), self._masks[oid], self._boxes[oid])
            for oid in sorted(self._masks)
        )
        return Tracks(self.frame_count, self.size, tracks)


def postprocess_tracks(
    tracks: Tracks, *, score_threshold: float = 0.5, overlap_threshold: float = 0.3
) -> Tracks:
    """The image agent's post-processing carried to tracks; overlap is the summed
    intersection over the smaller track's summed area, over all frames."""
    if not 0.0 <= overlap_threshold <= 1.0:
        raise ValueError(f"overlap_threshold must be in [0, 1], got {overlap_threshold}")
    candidates = sorted(
        (t for t in tracks if t.score >= score_threshold and t.masks), key=lambda t: -t.score
    )
    kept: list[tuple[Track, int]] = []  # with its area
    for track in candidates:
        area = track.total_area()
        if not any(_intersection(track, k) > overlap_threshold * min(area, a) for k, a in kept):
            kept.append((track, area))
    return Tracks(tracks.frame_count, tracks.size, tuple(t for t, _ in kept))


def _joined(kept: Track, other: Track) -> Track:
    """One track of both, frame by frame (the union where both are present)."""
    masks, boxes = dict(kept.masks), dict(kept.boxes)
    for position, found in other.masks.items():
        if position not in masks:
            masks[position] = found
            if position in other.boxes:
                boxes[position] = other.boxes[position]
            continue
        union = rle.rle_union([masks[position], found])
        masks[position] = rle.encode_rle(union)
        boxes[position] = _box(tight_boxes(union[None])[0])
    return Track(kept.track_id, max(kept.score, other.score), masks, boxes)


def _track_iou(a: Track, b: Track) -> float:
    both = _intersection(a, b)
    return both / (a.total_area() + b.total_area() - both) if both else 0.0


def _fresh_id(track: Track, tracks: list[Track]) -> Track:
    ids = {t.track_id for t in tracks}
    return replace(track, track_id=max(ids) + 1) if track.track_id in ids else track


def _intersection(a: Track, b: Track) -> int:
    both = a.masks.keys() & b.masks.keys()
    return sum(rle.rle_intersection_area(a.masks[p], b.masks[p]) for p in both)


def _box(values: Any) -> Box:
    x0, y0, x1, y1 = (float(v) for v in values)
    return (x0, y0, x1, y1)
