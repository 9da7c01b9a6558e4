"""Copy-free encodings between agent and service: images as raw RGB (a level-1 PNG of 12 MP
takes seconds for ~55% of the bytes: ``python -m scripts.bench wire``); row-major masks as the
COCO RLE of their transpose (``rle_order="rows"``), with no copy on either side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pycocotools import mask as mask_utils

from sam3_agent.backends.schemas import RAW_RGB_MIME as RAW_RGB_MIME
from sam3_agent.backends.schemas import RleOrder
from sam3_agent.values.rle import encode_rle

BoolMasks = npt.NDArray[np.bool_]


def encode_masks(masks: BoolMasks, order: RleOrder) -> list[dict[str, Any]]:
    """``(N, H, W)`` bool masks as RLE dicts ``{"size": [..], "counts": str}``, in ``order``."""
    if len(masks) == 0:
        return []
    if order == "coco":
        return [encode_rle(m) for m in masks]
    # (N, H, W) C-contiguous read backwards is (W, H, N) Fortran-contiguous: each mask's
    # transpose, in the layout pycocotools wants, without copying a byte.
    as_bytes = np.ascontiguousarray(masks).view(np.uint8)
    rles = mask_utils.encode(as_bytes.transpose(2, 1, 0))
    return [
        {"size": [int(r["size"][0]), int(r["size"][1])], "counts": r["counts"].decode()}
        for r in rles
    ]


def decode_masks(
    rles: Sequence[dict[str, Any]], order: RleOrder, image_size: tuple[int, int]
) -> BoolMasks:
    """Inverse of :func:`encode_masks`; ValueError for an RLE not of the image's size."""
    height, width = image_size
    if not rles:
        return np.zeros((0, height, width), dtype=np.bool_)
    expected = [width, height] if order == "rows" else [height, width]
    coco = []
    for rle in rles:
        if list(rle["size"]) != expected:
            raise ValueError(f"RLE size {list(rle['size'])} does not match {expected}")
        counts = rle["counts"]
        coco.append(
            {"size": expected, "counts": counts.encode() if isinstance(counts, str) else counts}
        )
    decoded = mask_utils.decode(coco)  # (size[0], size[1], N) uint8, Fortran order
    if order == "rows":
        # (W, H, N) Fortran-contiguous read backwards is (N, H, W) C-contiguous: no copy.
        return decoded.transpose(2, 1, 0).view(np.bool_)
    return np.ascontiguousarray(decoded.transpose(2, 0, 1)).view(np.bool_)


def encode_raw(image: npt.NDArray[np.uint8]) -> bytes:
    return np.ascontiguousarray(image).tobytes()


def decode_raw(data: bytes, height: int, width: int) -> npt.NDArray[np.uint8]:
    """:data:`RAW_RGB_MIME` bytes as a read-only ``(H, W, 3)`` view (no copy)."""
    if height < 1 or width < 1 or len(data) != height * width * 3:
        raise ValueError(
            f"a {height}x{width} RGB image has {max(height, 0) * max(width, 0) * 3} bytes, "
            f"the body has {len(data)}"
        )
    return np.frombuffer(data, dtype=np.uint8).reshape(height, width, 3)
