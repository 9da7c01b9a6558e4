"""The run directory: every file a session leaves in its folder, named here and only here."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sam3_agent.agent.export import ExportFormat, mask_file_name, mask_png, mask_polygons
from sam3_agent.agent.result import AgentResult
from sam3_agent.media.render import legend, overlay
from sam3_agent.values.files import atomic_write_bytes, atomic_write_json, write_png
from sam3_agent.values.images import RGBImage

RESULT = "result.json"
OVERLAY = "overlay.png"
OVERLAY_VIDEO = "overlay.mp4"
OVERLAY_WEB = "overlay.webm"
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
    out: Path,
    result: AgentResult,
    image: RGBImage,
    exports: Iterable[ExportFormat] = (),
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
        OVERLAY_WEB,
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
