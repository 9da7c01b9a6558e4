"""Per-mask exports of a finished run, next to its ``overlay.png``.

* ``png``: ``masks/NN.png``, one binary (0 / 255) single-channel PNG per final mask at the
  image's full resolution, numbered from 01 in result order (the overlay's numbers).
* ``polygons``: each mask of ``result.json`` gets ``polygons``: its outer contours in COCO
  polygon form (``[x1, y1, x2, y2, ...]`` in pixels, holes not represented).

The overlay itself, with its legend, is written by the run
(:func:`sam3_agent.values.render.legend`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from sam3_agent.agent.result import AgentResult
from sam3_agent.values.detections import BoolArray, Detections
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import atomic_write_bytes, atomic_write_json

ExportFormat = Literal["png", "polygons"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("png", "polygons")
MASKS_DIR = "masks"


def parse_exports(text: str | None) -> frozenset[ExportFormat]:
    """``"png,polygons"`` -> the set of formats; ``None`` or ``""`` -> none.

    Raises:
        UserError: an unknown format name.
    """
    if not text:
        return frozenset()
    chosen: set[ExportFormat] = set()
    for part in text.split(","):
        name = part.strip().lower()
        if name not in EXPORT_FORMATS:
            raise UserError(
                f"--export takes a comma-separated list of {', '.join(EXPORT_FORMATS)}, "
                f"got {part.strip()!r}"
            )
        chosen.add(name)  # type: ignore[arg-type]  # checked against EXPORT_FORMATS
    return frozenset(chosen)


def mask_polygons(mask: BoolArray, min_points: int = 3) -> list[list[float]]:
    """Outer contours of a ``(H, W)`` bool mask as COCO polygons ``[x1, y1, x2, y2, ...]``.

    Contours with fewer than ``min_points`` vertices (single pixels, lines) are left out,
    as COCO tools refuse them.
    """
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


def write_mask_pngs(detections: Detections, out_dir: Path) -> list[str]:
    """Write ``masks/NN.png`` under ``out_dir`` for each mask (the ``png`` export; the demo's
    downloads too); returns their paths relative to ``out_dir``, in mask order."""
    count = len(detections)
    names = [f"{MASKS_DIR}/{mask_file_name(i, count)}" for i in range(count)]
    for i, (mask, name) in enumerate(zip(detections.masks, names, strict=True)):
        ok, buf = cv2.imencode(".png", np.where(mask, 255, 0).astype(np.uint8))
        if not ok:
            raise OSError(f"could not encode mask {i + 1} as PNG")
        atomic_write_bytes(out_dir / name, buf.tobytes())
    return names


def write_exports(
    result: AgentResult,
    out_dir: Path,
    formats: Iterable[ExportFormat],
) -> dict[str, Any]:
    """Write the asked ``formats`` beside the run's ``overlay.png``; returns the
    ``result.json`` document as written (unchanged unless ``polygons``)."""
    chosen = set(formats)
    detections = result.detections
    document = result.to_json()
    if "png" in chosen:
        document["mask_files"] = write_mask_pngs(detections, out_dir)
    if "polygons" in chosen:
        for entry, mask in zip(document["masks"], detections.masks, strict=True):
            entry["polygons"] = mask_polygons(mask)
    if chosen:
        atomic_write_json(out_dir / "result.json", document)
    return document
