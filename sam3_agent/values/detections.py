"""`Detections`: the validated container for masks, boxes and scores (after supervision's)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, Self, TypeVar

import numpy as np
import numpy.typing as npt

from sam3_agent.values.rle import BoolArray, decode_rle, encode_rle

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


SAME_OBJECT_IOU = 0.5
"""Two masks (tracks) overlapping by at least this IoU are one object when merged."""


class Candidates(Protocol):
    """What one phrase found, image or video, as the agent core uses it: counted, selected by
    0-based ``indices``, merged into a kept set, written to a checkpoint."""

    def __len__(self) -> int: ...

    def select(self, indices: Sequence[int]) -> Self: ...

    def merged(self, other: Self) -> tuple[Self, list[int]]:
        """``self`` with ``other`` added, each of ``other`` that is the same object as one of
        ``self`` (IoU at least :data:`SAME_OBJECT_IOU`) merged into it; and where each of
        ``other`` went (0-based positions in the result)."""
        ...

    def to_state(self) -> dict[str, Any]: ...


@dataclass(frozen=True, eq=False)
class Detections:
    """Instance masks for one image: ``masks`` ``(N, H, W)`` bool at full resolution,
    ``boxes`` ``(N, 4)`` float32 XYXY pixels, ``scores`` ``(N,)`` float32 in ``[0, 1]``;
    0-based indices. A selection keeps :attr:`mask_boxes` and its :attr:`origin`."""

    masks: BoolArray
    boxes: FloatArray
    scores: FloatArray

    def __post_init__(self) -> None:
        masks = np.asarray(self.masks)
        boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        object.__setattr__(self, "masks", masks)
        object.__setattr__(self, "boxes", boxes)
        object.__setattr__(self, "scores", scores)
        if masks.ndim != 3:
            raise ValueError(f"masks must have shape (N, H, W), got shape {masks.shape}")
        if masks.dtype != np.bool_:
            raise ValueError(f"masks must be bool, got dtype {masks.dtype}")
        n = masks.shape[0]
        if boxes.shape != (n, 4):
            raise ValueError(f"boxes must have shape ({n}, 4) (xyxy pixels), got {boxes.shape}")
        if scores.shape != (n,):
            raise ValueError(f"scores must have shape ({n},), got {scores.shape}")

    @classmethod
    def empty(cls, height: int, width: int) -> Detections:
        boxes, scores = np.zeros((0, 4), np.float32), np.zeros(0, np.float32)
        return cls(np.zeros((0, height, width), dtype=bool), boxes, scores)

    @classmethod
    def from_masks(cls, masks: BoolArray, scores: Sequence[float] | np.ndarray) -> Detections:
        masks = np.asarray(masks, dtype=bool)
        return cls(masks=masks, boxes=tight_boxes(masks), scores=np.asarray(scores))

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self.masks.shape[1]), int(self.masks.shape[2])

    def __len__(self) -> int:
        return int(self.masks.shape[0])

    def __iter__(self) -> Iterator[tuple[BoolArray, FloatArray, float]]:
        for i in range(len(self)):
            yield self.masks[i], self.boxes[i], float(self.scores[i])

    @cached_property
    def mask_boxes(self) -> IntArray:
        """Tight XYXY boxes of the masks (exclusive ends; zeros for an empty mask)."""
        return tight_boxes(self.masks).astype(np.int64)

    def with_mask_boxes(self, boxes: np.ndarray) -> Detections:
        """Attach already computed :attr:`mask_boxes`; returns ``self``."""
        boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
        if boxes.shape[0] != len(self):
            raise ValueError(f"mask_boxes must have shape ({len(self)}, 4), got {boxes.shape}")
        self.__dict__["mask_boxes"] = boxes
        return self

    @property
    def mask_boxes_known(self) -> bool:
        """:attr:`mask_boxes` is at hand (reading it costs nothing)."""
        return "mask_boxes" in self.__dict__

    @property
    def origin(self) -> tuple[Detections, IntArray] | None:
        """``(parent, indices)`` when selected from a ``parent`` still alive (held weakly)."""
        origin = self.__dict__.get("_origin")
        if origin is None:
            return None
        parent = origin[0]()
        return None if parent is None else (parent, origin[1])

    def __getitem__(self, index: int | slice | Sequence[int] | np.ndarray) -> Detections:
        """Select by int, slice, 0-based indices or boolean array; an evenly spaced ascending
        selection views the masks instead of copying them."""
        if isinstance(index, int | np.integer):
            index = [int(index)]
        index_array: slice | np.ndarray = index if isinstance(index, slice) else np.asarray(index)
        if isinstance(index_array, np.ndarray):
            if index_array.dtype == np.bool_:
                if index_array.shape != (len(self),):
                    raise IndexError(
                        f"boolean index must have shape ({len(self)},), got {index_array.shape}"
                    )
                index_array = np.flatnonzero(index_array)
            index_array = as_view_index(index_array.astype(np.int64), len(self))
        picked = self.masks[index_array], self.boxes[index_array], self.scores[index_array]
        selected = Detections(*picked)
        if self.mask_boxes_known:
            selected.__dict__["mask_boxes"] = self.mask_boxes[index_array]
        positions = np.arange(len(self), dtype=np.int64)[index_array]
        selected.__dict__["_origin"] = (weakref.ref(self), positions)
        return selected

    def select(self, indices: Sequence[int]) -> Detections:
        return self[list(indices)]

    def merged(self, other: Detections) -> tuple[Detections, list[int]]:
        rows = list(zip(self.masks, self.boxes, self.scores, strict=True))
        added = zip(other.masks, other.boxes, other.scores, strict=True)
        where = merge_same_objects(rows, added, _row_iou, _joined_rows)
        if not rows:
            return Detections.empty(*self.image_size), where
        masks, boxes, scores = zip(*rows, strict=True)
        return Detections(np.stack(masks), np.stack(boxes), np.asarray(scores)), where

    def to_state(self) -> dict[str, Any]:
        return {
            "rle": self.to_coco_rle(),
            "boxes": self.boxes.tolist(),
            "scores": self.scores.tolist(),
        }

    def union(self) -> BoolArray:
        return np.any(self.masks, axis=0)  # all False for no masks

    def to_coco_rle(self) -> list[dict[str, Any]]:
        return [encode_rle(m) for m in self.masks]

    @classmethod
    def from_coco_rle(
        cls,
        rles: Sequence[dict[str, Any]],
        boxes: Sequence[Sequence[float]] | np.ndarray,
        scores: Sequence[float] | np.ndarray,
        image_size: tuple[int, int],
    ) -> Detections:
        """Inverse of :meth:`to_coco_rle`. ``image_size`` is ``(height, width)``."""
        if not rles:
            return cls.empty(*image_size)
        masks = np.stack([decode_rle(r) for r in rles])
        if masks.shape[1:] != tuple(image_size):
            raise ValueError(f"RLE size {masks.shape[1:]} does not match image {image_size}")
        return cls(masks=masks, boxes=np.asarray(boxes), scores=np.asarray(scores))


def merge_same_objects(
    kept: list[T],
    added: Iterable[T],
    iou: Callable[[T, T], float],
    join: Callable[[T, T], T],
    fresh: Callable[[T, list[T]], T] = lambda item, _: item,
) -> list[int]:
    """Add each of ``added`` to ``kept`` in place: joined into the first one it overlaps by an
    IoU of at least :data:`SAME_OBJECT_IOU`, else appended (as ``fresh`` makes it); returns
    where each went (0-based)."""
    where: list[int] = []
    for item in added:
        same = next((i for i, k in enumerate(kept) if iou(item, k) >= SAME_OBJECT_IOU), None)
        if same is None:
            kept.append(fresh(item, kept))
            where.append(len(kept) - 1)
        else:
            kept[same] = join(kept[same], item)
            where.append(same)
    return where


_Row = tuple[BoolArray, FloatArray, np.float32]  # a mask, its box and its score


def _row_iou(a: _Row, b: _Row) -> float:
    both = int(np.logical_and(b[0], a[0]).sum())
    union = int(a[0].sum()) + int(b[0].sum()) - both
    return both / union if union else 0.0


def _joined_rows(kept: _Row, other: _Row) -> _Row:
    box = np.concatenate(
        [np.minimum(kept[1][:2], other[1][:2]), np.maximum(kept[1][2:], other[1][2:])]
    )
    return kept[0] | other[0], box, max(kept[2], other[2])


def as_view_index(indices: IntArray, count: int) -> slice | IntArray:
    """A slice selecting ``indices`` when they are an evenly spaced ascending run, else
    ``indices`` (out-of-range ones too, so indexing still raises)."""
    if indices.size == 0 or indices.min() < 0 or indices.max() >= count:
        return indices
    if indices.size == 1:
        return slice(int(indices[0]), int(indices[0]) + 1)
    steps = np.diff(indices)
    if steps[0] > 0 and np.all(steps == steps[0]):
        return slice(int(indices[0]), int(indices[-1]) + 1, int(steps[0]))
    return indices


def tight_boxes(masks: BoolArray) -> FloatArray:
    """XYXY boxes of each mask's True pixels, exclusive ``x2``/``y2``; zeros for an empty mask."""
    boxes = np.zeros((masks.shape[0], 4), dtype=np.float32)
    for i, m in enumerate(masks):
        rows = np.flatnonzero(m.any(axis=1))
        if rows.size == 0:
            continue
        cols = np.flatnonzero(m[rows[0] : rows[-1] + 1].any(axis=0))
        boxes[i] = (cols[0], rows[0], cols[-1] + 1, rows[-1] + 1)
    return boxes


@dataclass(frozen=True)
class Exemplars:
    """Boxes SAM 3 takes beside a phrase: XYXY in pixels of the original image, each marked
    ``positive`` (an instance of the concept) or not (something the concept excludes)."""

    boxes: tuple[tuple[int, int, int, int], ...] = ()
    positive: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if len(self.boxes) != len(self.positive):
            raise ValueError(
                f"exemplars need one label per box, got {len(self.boxes)} boxes and "
                f"{len(self.positive)} labels"
            )

    def __len__(self) -> int:
        return len(self.boxes)

    def to_json(self) -> dict[str, list[Any]]:
        return {"boxes": [list(b) for b in self.boxes], "positive": list(self.positive)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Exemplars:
        boxes = tuple((int(b[0]), int(b[1]), int(b[2]), int(b[3])) for b in doc["boxes"])
        return cls(boxes, tuple(bool(p) for p in doc["positive"]))
