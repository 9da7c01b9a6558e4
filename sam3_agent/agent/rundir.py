"""The run directory: every file a session leaves in its folder, named here and only here,
and the per-mask exports: ``png`` (``masks/NN.png``, 0 / 255, full resolution, the overlay's
numbers) and ``polygons`` (outer COCO contours in ``result.json``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from sam3_agent.agent.result import AgentResult
from sam3_agent.media.render import legend, overlay
from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import atomic_write_bytes, atomic_write_json, write_png
from sam3_agent.values.images import RGBImage

RESULT = "result.json"
OVERLAY = "overlay.png"
OVERLAY_VIDEO = "overlay.mp4"
CONTACT_SHEET = "contact_sheet.png"
MASKS_DIR = "masks"
TRACE = "trace.jsonl"
IMAGES_DIR = "images"
SYSTEM_PROMPT = "system_prompt.txt"
CHECKER_PROMPT = "checker_prompt.txt"
PROMPT_SET = "prompt_set.json"
STATE = "session.json"
JOURNAL = "calls.jsonl"
LOCK = ".session.lock"


def result_document(result: AgentResult, exports: Iterable[ExportFormat] = ()) -> dict[str, Any]:
    """The ``result.json`` document of ``result``, with the ``exports`` unless it failed."""
    chosen = set(exports) if result.status != "failed" else set()
    document = result.to_json()
    detections = result.detections
    if "png" in chosen:
        count = len(detections)
        document["mask_files"] = [f"{MASKS_DIR}/{mask_file_name(i, count)}" for i in range(count)]
    if "polygons" in chosen:
        for entry, mask in zip(document["masks"], detections.masks, strict=True):
            entry["polygons"] = mask_polygons(mask)
    return document


def write_run(
    out: Path, result: AgentResult, image: RGBImage, exports: Iterable[ExportFormat] = ()
) -> dict[str, Any]:
    """Write the mask PNGs asked for, ``overlay.png`` on ``image``, then ``result.json``."""
    chosen = frozenset(exports)
    result.output_dir = out
    document = result_document(result, chosen)
    if "png" in chosen and result.status != "failed":
        count = len(result.detections)
        for i, mask in enumerate(result.detections.masks):
            atomic_write_bytes(out / MASKS_DIR / mask_file_name(i, count), mask_png(mask, i))
    canvas = overlay(image, result.detections)
    write_png(out / OVERLAY, legend(canvas, result.query, result.detections))
    atomic_write_json(out / RESULT, document)
    return document


MARKERS = (RESULT, TRACE, SYSTEM_PROMPT)  # a directory holding one was written by a run

ENTRIES = frozenset(
    {
        RESULT,
        OVERLAY,
        OVERLAY_VIDEO,
        CONTACT_SHEET,
        MASKS_DIR,
        TRACE,
        IMAGES_DIR,
        SYSTEM_PROMPT,
        CHECKER_PROMPT,
        PROMPT_SET,
        STATE,
        JOURNAL,
        LOCK,
    }
)
"""Every name a run writes at the top of its directory (all that an overwrite may remove)."""


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
