"""Image datasets in their published layouts (docs/evaluation.md), as :class:`Sample` values
in dataset order, each scored in the frame its masks were drawn in (ReasonSeg's EXIF-oriented
image, COCO's stored pixels for the refer datasets of :mod:`.refer`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from sam3_agent.media.video import FRAME_SUFFIXES
from sam3_agent.runs.evaluation.catalog import IMAGE_DATASETS
from sam3_agent.runs.evaluation.refer import load_refer
from sam3_agent.runs.evaluation.samples import (
    GroundTruth,
    Sample,
    first_dir,
    image_size,
    read_json,
)
from sam3_agent.values.errors import DatasetError, UserError

logger = logging.getLogger(__name__)

DATASETS = tuple(IMAGE_DATASETS)


def load_samples(
    dataset: str,
    root: Path,
    split: str,
    *,
    images: Path | None = None,
    all_texts: bool = False,
) -> list[Sample]:
    """The samples of ``dataset``'s ``split`` under ``root``. ``images``: COCO train2014 for
    the refer datasets (None: found under ``root``); ``all_texts``: every ReasonSeg text."""
    if dataset not in DATASETS:
        raise UserError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if all_texts and dataset != "reasonseg":
        raise UserError(
            "`all_texts` applies to reasonseg only (refer datasets already use every sentence)"
        )
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    if dataset == "reasonseg":
        return load_reasonseg(root, split, all_texts=all_texts)
    return load_refer(root, dataset, split, images)


def load_reasonseg(root: Path, split: str, *, all_texts: bool = False) -> list[Sample]:
    """ReasonSeg samples, ids ``<split>/<image stem>#<text index>``, tagged ``long`` (when
    ``is_sentence``) or ``short``."""
    split_dir = first_dir(root / split, root / "ReasonSeg" / split)
    if split_dir is None:
        raise DatasetError(f"ReasonSeg split folder not found: {root / split}")
    image_files = sorted(p for p in split_dir.iterdir() if p.suffix.lower() in FRAME_SUFFIXES)
    stems = {p.stem for p in image_files}
    for json_path in sorted(split_dir.glob("*.json")):
        if json_path.stem not in stems:
            raise DatasetError(f"{json_path}: annotation without an image beside it")
    samples: list[Sample] = []
    for image_path in image_files:
        json_path = image_path.with_suffix(".json")
        base_id = f"{split}/{image_path.stem}"
        if not json_path.is_file():
            raise DatasetError(f"{json_path}: missing annotation for sample {base_id}")
        doc = _read_reasonseg_json(json_path, base_id)
        texts = doc["text"]
        tag = "long" if doc["is_sentence"] else "short"
        source = ReasonSegGroundTruth(json_path, image_path, base_id)
        for k, text in enumerate(texts if all_texts else texts[:1]):
            sample = Sample(f"{base_id}#{k}", image_path, text, split, (tag,), gt_source=source)
            samples.append(sample)
    logger.info("ReasonSeg %s: %d samples from %d images", split, len(samples), len(image_files))
    return samples


def _read_reasonseg_json(path: Path, sample: str) -> dict[str, Any]:
    doc = read_json(path, sample)
    if not isinstance(doc, dict):
        raise DatasetError(f"{path} (sample {sample}): expected a JSON object")
    texts = doc.get("text")
    if isinstance(texts, str):
        texts = [texts]
    valid = isinstance(texts, list) and all(isinstance(t, str) and t.strip() for t in texts)
    if not valid or not texts:
        raise DatasetError(f"{path} (sample {sample}): 'text' must be a non-empty list of strings")
    if not isinstance(doc.get("is_sentence"), bool):
        raise DatasetError(f"{path} (sample {sample}): 'is_sentence' must be true or false")
    shapes = doc.get("shapes")
    if not isinstance(shapes, list):
        raise DatasetError(f"{path} (sample {sample}): 'shapes' must be a list of polygons")
    return {"text": [t.strip() for t in texts], "is_sentence": doc["is_sentence"], "shapes": shapes}


@dataclass(frozen=True)
class _Polygon:
    label: Literal["target", "ignore"]
    points: np.ndarray  # (K, 2) int32 pixel coordinates


def _parse_shapes(shapes: Sequence[Any], path: Path, sample: str) -> list[_Polygon]:
    polygons: list[_Polygon] = []
    for i, shape in enumerate(shapes):
        where = f"{path} (sample {sample}, shape {i})"
        if not isinstance(shape, dict) or not isinstance(shape.get("label"), str):
            raise DatasetError(f"{where}: a shape needs a string 'label'")
        label = shape["label"].strip().lower()
        if label == "flag":
            continue  # deprecated annotations, skipped as the dataset's authors do
        if label not in ("target", "ignore"):
            raise DatasetError(
                f"{where}: unknown label {shape['label']!r} (expected target, ignore or flag)"
            )
        try:
            points = np.asarray(shape.get("points"), dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise DatasetError(f"{where}: 'points' must be a list of [x, y]") from e
        if points.ndim != 2 or points.shape[1] != 2 or len(points) == 0:
            raise DatasetError(f"{where}: 'points' must be a non-empty list of [x, y] pairs")
        if not np.isfinite(points).all():
            raise DatasetError(f"{where}: 'points' contains non-finite coordinates")
        # Truncation to int32 matches how the dataset's reference masks are drawn.
        kind: Literal["target", "ignore"] = "ignore" if label == "ignore" else "target"
        polygons.append(_Polygon(kind, points.astype(np.int32)))
    return polygons


def _draw(canvas: np.ndarray, polygon: _Polygon, value: int) -> None:
    cv2.polylines(canvas, [polygon.points], True, value, 1)
    cv2.fillPoly(canvas, [polygon.points], value)


@dataclass(frozen=True)
class ReasonSegGroundTruth:
    """Rasterises a ReasonSeg annotation's polygons largest first, so a small one inside a
    large one (an ignored hole in a target) wins over it."""

    json_path: Path
    image_path: Path
    sample: str

    def load(self) -> GroundTruth:
        doc = _read_reasonseg_json(self.json_path, self.sample)
        polygons = _parse_shapes(doc["shapes"], self.json_path, self.sample)
        height, width = image_size(self.image_path, self.sample)
        areas = []
        for polygon in polygons:
            scratch = np.zeros((height, width), dtype=np.uint8)
            _draw(scratch, polygon, 1)
            areas.append(int(scratch.sum()))
        order = sorted(range(len(polygons)), key=lambda i: -areas[i])  # stable for equal areas
        labels = np.zeros((height, width), dtype=np.uint8)
        for i in order:
            _draw(labels, polygons[i], 2 if polygons[i].label == "ignore" else 1)
        ignore = labels == 2
        return GroundTruth(mask=labels == 1, ignore=ignore if ignore.any() else None)
