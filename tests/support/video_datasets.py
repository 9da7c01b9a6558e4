"""Tiny video datasets in each published layout, written to a folder for the loaders.

Every video has ``FRAMES`` JPEG frames of ``H x W``; object ``k`` is an 8-pixel square that
moves right 4 pixels a frame (:func:`object_mask`), so a test knows every ground-truth mask.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

H, W, FRAMES = 48, 64, 4


def object_mask(obj: int, frame: int) -> np.ndarray:
    """Object ``obj`` (1-based) in frame ``frame``: an 8x8 square, one row band per object."""
    mask = np.zeros((H, W), bool)
    y, x = 4 + 12 * (obj - 1), 2 + 4 * frame
    mask[y : y + 8, x : x + 8] = True
    return mask


def frame_names(n: int = FRAMES) -> list[str]:
    return [f"{i:05d}" for i in range(n)]


def write_frames(folder: Path, n: int = FRAMES) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in frame_names(n):
        cv2.imwrite(str(folder / f"{name}.jpg"), rng.integers(0, 255, (H, W, 3), np.uint8))


def write_palette_png(path: Path, labels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(labels.astype(np.uint8), mode="P")
    image.putpalette([0, 0, 0, 200, 0, 0, 0, 200, 0, 0, 0, 200] + [255, 255, 255] * 252)
    image.save(path)


def labels_at(frame: int, objects: Sequence[int]) -> np.ndarray:
    labels = np.zeros((H, W), np.uint8)
    for obj in objects:
        labels[object_mask(obj, frame)] = obj
    return labels


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def rle(mask: np.ndarray) -> dict[str, Any]:
    encoded = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(s) for s in encoded["size"]], "counts": encoded["counts"].decode()}


def _meta(expressions: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"expressions": expressions, "frames": frame_names(), **extra}


def make_ref_youtube_vos(root: Path) -> Path:
    """train: video ``v1`` with objects 1 and 2, annotated on frames 0-2 (frame 3 has no
    PNG); valid: ``v2`` and ``t1``, the latter also listed as a test video."""
    write_json(
        root / "meta_expressions/train/meta_expressions.json",
        {
            "videos": {
                "v1": _meta(
                    {
                        "0": {"exp": "a red  square", "obj_id": "1"},
                        "1": {"exp": "the lower square", "obj_id": "2"},
                    }
                )
            }
        },
    )
    write_frames(root / "train/JPEGImages/v1")
    for frame in range(FRAMES - 1):
        write_palette_png(root / f"train/Annotations/v1/{frame:05d}.png", labels_at(frame, [1, 2]))
    valid = {v: _meta({"0": {"exp": f"thing in {v}"}}) for v in ("v2", "t1")}
    write_json(root / "meta_expressions/valid/meta_expressions.json", {"videos": valid})
    write_json(
        root / "meta_expressions/test/meta_expressions.json", {"videos": {"t1": valid["t1"]}}
    )
    for v in ("v2", "t1"):
        write_frames(root / f"valid/JPEGImages/{v}")
    return root


def make_ref_davis17(root: Path) -> Path:
    """valid: video ``d1``, object 1 with four expressions (ReferFormer's order), void
    pixels (255) in a corner of every frame."""
    names = ["first anno1", "full anno1", "first anno2", "full anno2"]
    write_json(
        root / "meta_expressions/valid/meta_expressions.json",
        {"videos": {"d1": _meta({str(i): {"exp": n, "obj_id": "1"} for i, n in enumerate(names)})}},
    )
    write_frames(root / "valid/JPEGImages/d1")
    for frame in range(FRAMES):
        labels = labels_at(frame, [1, 2])
        labels[-3:, -3:] = 255
        write_palette_png(root / f"valid/Annotations/d1/{frame:05d}.png", labels)
    return root


def make_mevis(root: Path) -> Path:
    """valid_u: video ``m1``; anno 10 = object 1 (absent in frame 2), anno 11 = object 2.
    Expressions: 0 -> [10], 1 -> [10, 11]. valid: video ``m2`` without masks."""
    split = root / "valid_u"
    write_json(
        split / "meta_expressions.json",
        {
            "videos": {
                "m1": _meta(
                    {
                        "0": {"exp": "the top square", "obj_id": [0], "anno_id": [10]},
                        "1": {"exp": "both squares", "obj_id": [0, 1], "anno_id": [10, 11]},
                    }
                )
            }
        },
    )
    write_json(
        split / "mask_dict.json",
        {
            "10": [None if f == 2 else rle(object_mask(1, f)) for f in range(FRAMES)],
            "11": [rle(object_mask(2, f)) for f in range(FRAMES)],
            "99": [None] * FRAMES,
        },
    )
    write_frames(split / "JPEGImages/m1")
    write_json(
        root / "valid/meta_expressions.json",
        {"videos": {"m2": _meta({"0": {"exp": "a moving thing"}})}},
    )
    write_frames(root / "valid/JPEGImages/m2")
    return root


def make_revos(parent: Path) -> Path:
    """``parent/ReVOS``: video ``r1``; expressions of type 0 (object 1), 1 (object 2) and 2
    (no object)."""
    root = parent / "ReVOS"
    exps = {
        "0": {"exp": "the top square", "obj_id": [0], "anno_id": [1], "type_id": 0},
        "1": {"exp": "what moves below?", "obj_id": [1], "anno_id": [2], "type_id": 1},
        "2": {"exp": "the purple cow", "obj_id": [], "anno_id": [], "type_id": 2},
    }
    write_json(root / "meta_expressions_valid_.json", {"videos": {"r1": _meta(exps)}})
    write_json(
        root / "mask_dict.json",
        {str(obj): [rle(object_mask(obj, f)) for f in range(FRAMES)] for obj in (1, 2)},
    )
    write_frames(root / "JPEGImages/r1")
    return parent


def make_reasonvos(parent: Path) -> Path:
    """``parent/ReasonVOS``: video ``q1`` from MeViS (sentence queries), object 1, masks on
    frames 0 and 2 only (binary PNGs, 255 = object), in the lower-cased source folder."""
    root = parent / "ReasonVOS"
    write_json(
        root / "meta_expressions.json",
        {
            "videos": {
                "q1": _meta(
                    {"0": {"exp_text": "Which square is on top?", "obj_id": 1}},
                    source="MeViS",
                    is_sent=True,
                )
            }
        },
    )
    write_frames(root / "JPEGImages/q1")
    masks = root / "Annotations/mevis_q1_1"
    masks.mkdir(parents=True)
    for frame in (0, 2):
        cv2.imwrite(str(masks / f"{frame:05d}.png"), object_mask(1, frame).astype(np.uint8) * 255)
    return parent
