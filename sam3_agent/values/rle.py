"""The COCO RLE codec: ``(H, W)`` bool masks to and from ``{"size": [H, W], "counts": str}``,
pycocotools' compressed column-major string (the service's row-order form is
:mod:`sam3_agent.backends.wire`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pycocotools import mask as mask_utils

BoolArray = npt.NDArray[np.bool_]


def encode_rle(mask: BoolArray) -> dict[str, Any]:
    """The same bytes pycocotools' ``encode`` writes. Where the mask's box is under half the
    image only the box is scanned (pycocotools would first copy the whole mask to
    column-major order)."""
    mask = np.asarray(mask, dtype=bool)
    h, w = mask.shape
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        counts = np.asarray([h * w])
    else:
        y0, y1 = int(rows[0]), int(rows[-1]) + 1
        cols = np.flatnonzero(mask[y0:y1].any(axis=0))
        x0, x1 = int(cols[0]), int(cols[-1]) + 1
        if 2 * (y1 - y0) * (x1 - x0) > h * w:
            encoded = mask_utils.encode(np.asfortranarray(mask, dtype=np.uint8))
            return {"size": [h, w], "counts": encoded["counts"].decode()}
        padded = np.zeros((y1 - y0 + 2, x1 - x0), dtype=np.int8)
        padded[1:-1] = mask[y0:y1, x0:x1]
        # Value changes down each column of the box (zero rows pad it above and below),
        # column by column: that is the column-major order RLE runs are counted in.
        c, r = np.nonzero((padded[1:] != padded[:-1]).T)
        flips = (x0 + c).astype(np.int64) * h + y0 + r
        # A box spanning the full height makes a column's last change and the next column's
        # first meet at one position: the two cancel out.
        flips, seen = np.unique(flips, return_counts=True)
        flips = flips[(seen == 1) & (flips < h * w)]  # no empty run after the last pixel
        counts = np.diff(np.concatenate([[0], flips, [h * w]]))
    compressed = mask_utils.frPyObjects({"size": [h, w], "counts": counts.tolist()}, h, w)
    return {"size": [h, w], "counts": compressed["counts"].decode()}


def decode_rle(rle: Mapping[str, Any]) -> BoolArray:
    """``counts`` may be str or bytes."""
    return np.asarray(mask_utils.decode(_pycocotools(rle)), dtype=bool)


def rle_area(rle: Mapping[str, Any]) -> int:
    """Pixels set in the mask, counted on the runs (nothing decoded)."""
    return int(mask_utils.area(_pycocotools(rle)))


def rle_union(rles: Sequence[Mapping[str, Any]]) -> BoolArray:
    merged = mask_utils.merge([_pycocotools(r) for r in rles])
    return np.asarray(mask_utils.decode(merged), dtype=bool)


def rle_intersection_area(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    """Pixels set in both masks, counted on the runs (nothing decoded)."""
    merged = mask_utils.merge([_pycocotools(a), _pycocotools(b)], True)
    return int(mask_utils.area(merged))


def _pycocotools(rle: Mapping[str, Any]) -> dict[str, Any]:
    counts = rle["counts"]
    return {
        "size": list(rle["size"]),
        "counts": counts.encode() if isinstance(counts, str) else counts,
    }
