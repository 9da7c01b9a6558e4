"""Evaluation datasets in their published on-disk formats.

Each loader returns :class:`Sample` values in a deterministic dataset order. A sample knows
its stable id, image path, query, split and tags; its ground-truth mask is loaded only when
asked (:meth:`Sample.load_gt`), so listing 10k samples costs no mask decoding.

Layouts:

* ReasonSeg (LISA): ``ROOT/<split>/<name>.jpg`` + ``<name>.json`` with ``text`` (queries;
  the first is the evaluated one), ``is_sentence`` (long query) and ``shapes`` (polygons
  labelled ``target``, ``ignore`` or ``flag``).
* RefCOCO / RefCOCO+ / RefCOCOg (``refer`` layout): ``ROOT/<dataset>/refs(unc).p`` (or
  ``refs(umd).p`` for RefCOCOg) + ``instances.json``; images from COCO train2014.
* gRefCOCO: ``ROOT/grefcoco/grefs(unc).json`` + ``instances.json``; ``ann_id`` is a list and
  ``[-1]`` (or ``no_target: true``) marks a sample without a target.

Image frames: each dataset is scored in the frame its masks were drawn in
(:attr:`Sample.exif_orientation`). ReasonSeg's polygons were drawn on the image as displayed,
and LISA's loader reads it with ``cv2.imread``, which applies the EXIF orientation: its
samples are loaded oriented, and the ground truth is rasterised at the displayed size.
COCO's annotations (RefCOCO, RefCOCO+, RefCOCOg, gRefCOCO) are in the stored pixel frame:
``instances.json`` gives each image's stored width and height, and pycocotools rasterises in
that frame; their images are loaded without applying the EXIF orientation.

Every unreadable or inconsistent file raises :class:`~sam3_agent.values.errors.DatasetError` naming
the file and, where there is one, the sample.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import DatasetError, ImageLoadError, UserError
from sam3_agent.values.images import image_size_as_displayed

logger = logging.getLogger(__name__)

DatasetName = Literal["reasonseg", "refcoco", "refcoco+", "refcocog", "grefcoco"]
DATASETS: tuple[DatasetName, ...] = ("reasonseg", "refcoco", "refcoco+", "refcocog", "grefcoco")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")

# The refer toolkit's split files: RefCOCO/RefCOCO+ use the UNC split, RefCOCOg the UMD one.
REFER_FILES: dict[str, str] = {
    "refcoco": "refs(unc).p",
    "refcoco+": "refs(unc).p",
    "refcocog": "refs(umd).p",
    "grefcoco": "grefs(unc).json",
}


@dataclass(frozen=True)
class GroundTruth:
    """A sample's ground truth at the image's full resolution.

    Attributes:
        mask: ``(H, W)`` bool target pixels (all False for a no-target sample).
        ignore: ``(H, W)`` bool pixels excluded from scoring, or None when there are none.
    """

    mask: BoolArray
    ignore: BoolArray | None = None

    @property
    def image_size(self) -> tuple[int, int]:
        """``(height, width)``."""
        return int(self.mask.shape[0]), int(self.mask.shape[1])


class GroundTruthSource(Protocol):
    """Something that can produce a sample's ground truth on demand."""

    def load(self) -> GroundTruth:
        """Decode the ground truth. Raises :class:`DatasetError` on a broken file."""
        ...


@dataclass(frozen=True)
class Sample:
    """One (image, query) pair to evaluate.

    Attributes:
        id: stable across runs and processes; unique within a dataset (includes the split).
        image_path: the image file.
        query: the text given to the agent.
        split: dataset split (``val``, ``testA``, ...).
        tags: breakdown labels (ReasonSeg ``short``/``long``; gRefCOCO ``target``/``no-target``).
        no_target: True when the correct answer is no mask at all (gRefCOCO).
        exif_orientation: load the image with its EXIF orientation applied (True: the
            dataset's masks are in the displayed frame) or as stored (False: COCO).
    """

    id: str
    image_path: Path
    query: str
    split: str
    tags: tuple[str, ...] = ()
    no_target: bool = False
    exif_orientation: bool = True
    gt_source: GroundTruthSource | None = field(default=None, compare=False, repr=False)

    def load_gt(self) -> GroundTruth:
        """The ground truth, decoded now (not cached: callers hold it as long as they need)."""
        if self.gt_source is None:
            raise DatasetError(f"sample {self.id}: no ground truth attached")
        return self.gt_source.load()


def load_samples(
    dataset: str,
    root: Path,
    split: str,
    *,
    images: Path | None = None,
    all_texts: bool = False,
) -> list[Sample]:
    """The samples of ``dataset``'s ``split`` under ``root``, in dataset order.

    Args:
        dataset: one of :data:`DATASETS`.
        root: the dataset directory (see the module docstring for each layout).
        split: split name as written in the dataset files.
        images: COCO train2014 image directory for the refer datasets (found under ``root``
            when omitted).
        all_texts: ReasonSeg only: evaluate every text of an image as its own sample instead
            of only the first.

    Raises:
        UserError: unknown dataset or an option that does not apply to it.
        DatasetError: missing, unreadable or inconsistent files.
    """
    if dataset not in DATASETS:
        raise UserError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    if all_texts and dataset != "reasonseg":
        raise UserError(
            "--all-texts applies to reasonseg only (refer datasets already use every sentence)"
        )
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    if dataset == "reasonseg":
        return load_reasonseg(root, split, all_texts=all_texts)
    if dataset == "grefcoco":
        return load_grefcoco(root, split, images=images)
    return load_refcoco(root, split, dataset=dataset, images=images)


# --------------------------------------------------------------------------- ReasonSeg


def load_reasonseg(root: Path, split: str, *, all_texts: bool = False) -> list[Sample]:
    """ReasonSeg samples of ``split``: ``ROOT/<split>/*.jpg`` with a ``.json`` beside each.

    Sample ids are ``<split>/<image stem>#<text index>``; tags are ``long`` when
    ``is_sentence`` is true, else ``short``.
    """
    split_dir = _first_dir(root / split, root / "ReasonSeg" / split)
    if split_dir is None:
        raise DatasetError(f"ReasonSeg split folder not found: {root / split}")
    image_files = sorted(p for p in split_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
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
            samples.append(
                Sample(
                    id=f"{base_id}#{k}",
                    image_path=image_path,
                    query=text,
                    split=split,
                    tags=(tag,),
                    gt_source=source,
                )
            )
    logger.info("ReasonSeg %s: %d samples from %d images", split, len(samples), len(image_files))
    return samples


def _read_json(path: Path, sample: str | None = None) -> Any:
    where = f"{path}" + (f" (sample {sample})" if sample else "")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{where}: cannot read: {e}") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # Some published ReasonSeg annotations are saved as Windows-1252.
        text = raw.decode("cp1252", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: invalid JSON: {e}") from e


def _read_reasonseg_json(path: Path, sample: str) -> dict[str, Any]:
    doc = _read_json(path, sample)
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
    """Rasterises a ReasonSeg annotation: target and ignore polygons, largest first.

    Filling in descending area order lets a small polygon drawn inside a large one
    (an ignored hole in a target, say) win over it.
    """

    json_path: Path
    image_path: Path
    sample: str

    def load(self) -> GroundTruth:
        doc = _read_reasonseg_json(self.json_path, self.sample)
        polygons = _parse_shapes(doc["shapes"], self.json_path, self.sample)
        height, width = _image_size(self.image_path, self.sample)
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


def _image_size(path: Path, sample: str) -> tuple[int, int]:
    """``(height, width)`` as displayed (EXIF orientation applied), from the header only."""
    try:
        return image_size_as_displayed(path)
    except ImageLoadError as e:
        raise DatasetError(f"{path} (sample {sample}): {e}") from e


# --------------------------------------------------------------------------- refer datasets


def _first_dir(*candidates: Path) -> Path | None:
    return next((c for c in candidates if c.is_dir()), None)


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
            raise DatasetError(f"--images {images} is not a directory")
        return images
    candidates = [
        base / rel
        for base in (root, root.parent, dataset_dir.parent)
        for rel in ("images/mscoco/images/train2014", "images/train2014", "train2014")
    ]
    found = _first_dir(*candidates)
    if found is None:
        raise DatasetError(f"COCO train2014 images not found under {root}; pass --images DIR")
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
    doc = _read_json(path)
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("images"), list)
        or not isinstance(doc.get("annotations"), list)
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
            counts = seg["counts"]
            encoded = counts.encode() if isinstance(counts, str) else counts
            rle = {"size": seg["size"], "counts": encoded}
        else:
            raise DatasetError(f"{where}: segmentation is neither polygons nor RLE")
        decoded = np.asarray(mask_utils.decode(rle), dtype=bool)
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


def load_refcoco(
    root: Path, split: str, *, dataset: str = "refcoco", images: Path | None = None
) -> list[Sample]:
    """RefCOCO / RefCOCO+ / RefCOCOg samples: every sentence of every ref in ``split``.

    Sample ids are ``<split>/<ref_id>/<sent_id>``.
    """
    dataset_dir = _dataset_dir(root, dataset)
    refs_path = dataset_dir / REFER_FILES[dataset]
    try:
        with refs_path.open("rb") as f:
            refs = pickle.load(f)
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ImportError,
        ValueError,
    ) as e:
        raise DatasetError(f"{refs_path}: cannot read the refs pickle: {e}") from e
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise DatasetError(f"{refs_path}: expected a list of ref dicts")
    _check_splits(refs, split, refs_path)
    coco = _load_instances(dataset_dir)
    image_dir = _images_dir(root, dataset_dir, images)
    samples: list[Sample] = []
    for ref in refs:
        if ref.get("split") != split:
            continue
        ref_name = f"ref {ref.get('ref_id')}"
        entry = _image_entry(coco, ref.get("image_id"), refs_path, ref_name)
        try:
            ann = coco.annotations[int(ref["ann_id"])]
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(
                f"{refs_path} ({ref_name}): ann_id {ref.get('ann_id')!r} not in {coco.path}"
            ) from e
        for sent_id, text in _sentences(ref, refs_path, ref_name):
            sample_id = f"{split}/{ref.get('ref_id')}/{sent_id}"
            samples.append(
                Sample(
                    id=sample_id,
                    image_path=image_dir / str(entry["file_name"]),
                    query=text,
                    split=split,
                    exif_orientation=False,
                    gt_source=CocoGroundTruth(
                        (ann,), int(entry["height"]), int(entry["width"]), coco.path, sample_id
                    ),
                )
            )
    logger.info("%s %s: %d samples", dataset, split, len(samples))
    return samples


def load_grefcoco(root: Path, split: str, *, images: Path | None = None) -> list[Sample]:
    """gRefCOCO samples: every sentence of every ref in ``split``.

    A ref whose ``ann_id`` is ``[-1]`` or whose ``no_target`` is true has no target: its
    ground truth is empty and it is tagged ``no-target`` (others ``target``).
    """
    dataset_dir = _dataset_dir(root, "grefcoco")
    refs_path = dataset_dir / REFER_FILES["grefcoco"]
    refs = _read_json(refs_path)
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise DatasetError(f"{refs_path}: expected a list of ref objects")
    _check_splits(refs, split, refs_path)
    coco = _load_instances(dataset_dir)
    image_dir = _images_dir(root, dataset_dir, images)
    samples: list[Sample] = []
    for ref in refs:
        if ref.get("split") != split:
            continue
        ref_name = f"ref {ref.get('ref_id')}"
        entry = _image_entry(coco, ref.get("image_id"), refs_path, ref_name)
        raw_ids = ref.get("ann_id")
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
        for sent_id, text in _sentences(ref, refs_path, ref_name):
            sample_id = f"{split}/{ref.get('ref_id')}/{sent_id}"
            samples.append(
                Sample(
                    id=sample_id,
                    image_path=image_dir / str(entry["file_name"]),
                    query=text,
                    split=split,
                    tags=("no-target" if no_target else "target",),
                    no_target=no_target,
                    exif_orientation=False,
                    gt_source=CocoGroundTruth(
                        tuple(anns), int(entry["height"]), int(entry["width"]), coco.path, sample_id
                    ),
                )
            )
    logger.info("grefcoco %s: %d samples", split, len(samples))
    return samples
