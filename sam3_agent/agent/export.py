"""Per-mask export formats of a finished run: ``png`` (``masks/NN.png``, 0 / 255, full
resolution, the overlay's numbers) and ``polygons`` (outer COCO contours in ``result.json``)."""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import UserError

ExportFormat = Literal["png", "polygons"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("png", "polygons")


def parse_exports(text: str | None) -> frozenset[ExportFormat]:
    """``"png,polygons"`` -> the set of formats; ``None`` or ``""`` -> none."""
    if not text:
        return frozenset()
    known: dict[str, ExportFormat] = {name: name for name in EXPORT_FORMATS}
    chosen: set[ExportFormat] = set()
    for part in text.split(","):
        name = part.strip().lower()
        if name not in known:
            raise UserError(
                f"`export` takes a comma-separated list of {', '.join(EXPORT_FORMATS)}, "
                f"got {part.strip()!r}"
            )
        chosen.add(known[name])
    return frozenset(chosen)


def mask_polygons(mask: BoolArray, min_points: int = 3) -> list[list[float]]:
    """Outer contours of a ``(H, W)`` bool mask as COCO polygons ``[x1, y1, x2, y2, ...]``,
    without those under ``min_points`` vertices (COCO tools refuse them)."""
    contours, _ = cv2.findContours(
        np.ascontiguousarray(mask, dtype=np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    return [
        [float(v) for v in contour.reshape(-1).tolist()]
        for contour in contours
        if len(contour) >= min_points
    ]


def mask_file_name(index: int, count: int) -> str:
    """``01.png`` for 0-based ``index``; at least two digits, more for 100+ masks."""
    return f"{index + 1:0{max(2, len(str(count)))}d}.png"


def mask_png(mask: BoolArray, index: int = 0) -> bytes:
    """``mask`` as a 0 / 255 single-channel PNG; ``index`` (0-based) names it in an error."""
    ok, buf = cv2.imencode(".png", np.where(mask, 255, 0).astype(np.uint8))
    if not ok:
        raise OSError(f"could not encode mask {index + 1} as PNG")
    return bytes(buf.tobytes())
