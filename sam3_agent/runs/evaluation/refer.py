"""The refer datasets: RefCOCO, RefCOCO+, RefCOCOg and gRefCOCO (layouts: docs/evaluation.md)."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

from sam3_agent.runs.evaluation.samples import GroundTruth, Sample, first_dir, read_json
from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import DatasetError
from sam3_agent.values.rle import decode_rle

logger = logging.getLogger(__name__)

# The refer toolkit's split files: RefCOCO/RefCOCO+ use the UNC split, RefCOCOg the UMD one.
REFER_FILES: dict[str, str] = {
    "refcoco": "refs(unc).p",
    "refcoco+": "refs(unc).p",
    "refcocog": "refs(umd).p",
    "grefcoco": "grefs(unc).json",
}


def _dataset_dir(root: Path, dataset: str) -> Path:
    """``root/<dataset>`` when it holds the split file, else ``root`` itself."""
    name = REFER_FILES[dataset]
    for candidate in (root / dataset, root):
        if (candidate / name).is_file():
            return candidate
    raise DatasetError(f"{name} not found in {root / dataset} or {root}")


def _images_dir(root: Path, dataset_dir: Path, images: Path | None) -> Path:
    if images is not None:
        if not images.is_dir():
            raise DatasetError(f"`images` {images} is not a directory")
        return images
    candidates = [
        base / rel
        for base in (root, root.parent, dataset_dir.parent)
        for rel in ("images/mscoco/images/train2014", "images/train2014", "train2014")
    ]
    found = first_dir(*candidates)
    if found is None:
        raise DatasetError(f"COCO train2014 images not found under {root}; pass `images='DIR'`")
    return found


@dataclass
class _Coco:
    """The parts of ``instances.json`` the refer datasets need."""

    path: Path
    images: dict[int, Mapping[str, Any]]
    annotations: dict[int, Mapping[str, Any]]


def _load_instances(dataset_dir: Path) -> _Coco:
    path = dataset_dir / "instances.json"
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    doc = read_json(path)
    if not isinstance(doc, dict) or not all(
        isinstance(doc.get(k), list) for k in ("images", "annotations")
    ):
        raise DatasetError(f"{path}: expected a COCO object with 'images' and 'annotations' lists")
    try:
        images = {int(im["id"]): im for im in doc["images"]}
        annotations = {int(a["id"]): a for a in doc["annotations"]}
    except (KeyError, TypeError, ValueError) as e:
        raise DatasetError(f"{path}: an image or annotation lacks an integer 'id'") from e
    return _Coco(path, images, annotations)


@dataclass(frozen=True)
class CocoGroundTruth:
    """The union of COCO annotation masks (polygons or RLE), empty when there are none."""

    annotations: tuple[Mapping[str, Any], ...]
    height: int
    width: int
    file: Path
    sample: str

    def load(self) -> GroundTruth:
        mask = np.zeros((self.height, self.width), dtype=bool)
        for ann in self.annotations:
            mask |= _annotation_mask(ann, self.height, self.width, self.file, self.sample)
        return GroundTruth(mask=mask)


def _annotation_mask(
    ann: Mapping[str, Any], height: int, width: int, file: Path, sample: str
) -> BoolArray:
    seg = ann.get("segmentation")
    where = f"{file} (sample {sample}, annotation {ann.get('id')})"
    try:
        if isinstance(seg, list):
            if not seg:
                raise DatasetError(f"{where}: empty segmentation")
            rle = mask_utils.merge(mask_utils.frPyObjects(seg, height, width))
        elif isinstance(seg, dict) and isinstance(seg.get("counts"), list):
            rle = mask_utils.frPyObjects(seg, height, width)
        elif isinstance(seg, dict) and isinstance(seg.get("counts"), str | bytes):
            rle = seg
        else:
            raise DatasetError(f"{where}: segmentation is neither polygons nor RLE")
        decoded = decode_rle(rle)
    except DatasetError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise DatasetError(f"{where}: cannot decode segmentation: {e}") from e
    if decoded.shape != (height, width):
        raise DatasetError(
            f"{where}: mask is {decoded.shape[0]}x{decoded.shape[1]}, image is {height}x{width}"
        )
    return decoded


def _sentences(ref: Mapping[str, Any], file: Path, ref_name: str) -> list[tuple[str, str]]:
    """``(sent_id, text)`` of each sentence of a ref."""
    sentences = ref.get("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise DatasetError(f"{file} ({ref_name}): 'sentences' must be a non-empty list")
    out = []
    for k, sent in enumerate(sentences):
        if not isinstance(sent, dict):
            raise DatasetError(f"{file} ({ref_name}, sentence {k}): not an object")
        text = sent.get("sent") or sent.get("raw")
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{file} ({ref_name}, sentence {k}): no 'sent' text")
        out.append((str(sent.get("sent_id", k)), text.strip()))
    return out


def _image_entry(coco: _Coco, image_id: Any, file: Path, ref_name: str) -> Mapping[str, Any]:
    try:
        entry = coco.images[int(image_id)]
        int(entry["height"]), int(entry["width"]), str(entry["file_name"])
    except (KeyError, TypeError, ValueError) as e:
        raise DatasetError(
            f"{file} ({ref_name}): image_id {image_id!r} missing or incomplete in {coco.path}"
        ) from e
    return entry


def _check_splits(refs: Sequence[Mapping[str, Any]], split: str, file: Path) -> None:
    available = sorted({str(r.get("split")) for r in refs})
    if split not in available:
        raise DatasetError(f"{file}: no split {split!r}; available: {', '.join(available)}")


Annotations = tuple[Mapping[str, Any], ...]


def load_refer(root: Path, dataset: str, split: str, images: Path | None) -> list[Sample]:
    """Every sentence of every ref in ``split``, ids ``<split>/<ref_id>/<sent_id>``; a gRefCOCO
    ref may have several annotations or none (tagged ``no-target``, the others ``target``)."""
    grefcoco = dataset == "grefcoco"
    # What a ref points at: its annotations, and whether it has no target (None: no such refs).
    targets = _annotations_or_none if grefcoco else _one_annotation
    dataset_dir = _dataset_dir(root, dataset)
    refs_path = dataset_dir / REFER_FILES[dataset]
    refs = read_json(refs_path) if grefcoco else _read_pickle(refs_path)
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise DatasetError(f"{refs_path}: expected a list of refs (each a mapping)")
    _check_splits(refs, split, refs_path)
    coco = _load_instances(dataset_dir)
    image_dir = _images_dir(root, dataset_dir, images)
    samples: list[Sample] = []
    for ref in refs:
        if ref.get("split") != split:
            continue
        ref_name = f"ref {ref.get('ref_id')}"
        entry = _image_entry(coco, ref.get("image_id"), refs_path, ref_name)
        anns, no_target = targets(coco, ref, refs_path, ref_name)
        tags = () if no_target is None else ("no-target" if no_target else "target",)
        for sent_id, text in _sentences(ref, refs_path, ref_name):
            sample_id = f"{split}/{ref.get('ref_id')}/{sent_id}"
            size = int(entry["height"]), int(entry["width"])
            gt = CocoGroundTruth(anns, *size, coco.path, sample_id)
            image = image_dir / str(entry["file_name"])
            samples.append(Sample(sample_id, image, text, split, tags, bool(no_target), False, gt))
    logger.info("%s %s: %d samples", dataset, split, len(samples))
    return samples


def _read_pickle(refs_path: Path) -> object:
    try:
        with refs_path.open("rb") as f:
            return pickle.load(f)
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ImportError,
        ValueError,
    ) as e:
        raise DatasetError(f"{refs_path}: cannot read the refs pickle: {e}") from e


def _one_annotation(
    coco: _Coco, ref: Mapping[str, Any], refs_path: Path, ref_name: str
) -> tuple[Annotations, None]:
    try:
        ann = coco.annotations[int(ref["ann_id"])]
    except (KeyError, TypeError, ValueError) as e:
        raise DatasetError(
            f"{refs_path} ({ref_name}): ann_id {ref.get('ann_id')!r} not in {coco.path}"
        ) from e
    return (ann,), None


def _annotations_or_none(
    coco: _Coco, ref: Mapping[str, Any], refs_path: Path, ref_name: str
) -> tuple[Annotations, bool]:
    raw_ids: Any = ref.get("ann_id")
    ann_ids = raw_ids if isinstance(raw_ids, list) else [raw_ids]
    try:
        ann_ids = [int(a) for a in ann_ids]
    except (TypeError, ValueError) as e:
        raise DatasetError(f"{refs_path} ({ref_name}): bad ann_id {raw_ids!r}") from e
    no_target = bool(ref.get("no_target", False)) or ann_ids == [-1]
    if no_target and ann_ids not in ([-1], []):
        raise DatasetError(
            f"{refs_path} ({ref_name}): marked no_target but lists annotations {ann_ids}"
        )
    if not no_target and (not ann_ids or -1 in ann_ids):
        raise DatasetError(f"{refs_path} ({ref_name}): bad ann_id list {ann_ids}")
    anns: list[Mapping[str, Any]] = []
    for a in [] if no_target else ann_ids:
        if a not in coco.annotations:
            raise DatasetError(f"{refs_path} ({ref_name}): ann_id {a} not in {coco.path}")
        anns.append(coco.annotations[a])
    return tuple(anns), no_target
