"""Referring and reasoning video segmentation datasets in their published on-disk layouts.

Each loader lists :class:`VideoSample` values in the order of the dataset's own files (videos,
then expressions, as their JSON lists them). A sample is one object-expression: a video (a
folder of frames), the text, and a ground truth that decodes one frame at a time when
iterated (:meth:`VideoSample.ground_truth`), never the whole video at once. Listing decodes
no mask. Every missing, unreadable or inconsistent file raises
:class:`~sam3_agent.values.errors.DatasetError` in one line naming the file and, where there
is one, the sample.

Sample ids are ``<split>/<video id>/<expression id>``: stable across runs and processes, and
unique within a dataset.

Layouts read, and where they are documented (file names exactly as distributed):

* **Ref-YouTube-VOS** (``ref-youtube-vos``; ReferFormer's ``docs/data.md`` and
  ``inference_ytvos.py``, as the CodaLab competition 29139 distributes it)::

      ROOT/meta_expressions/<split>/meta_expressions.json
           {"videos": {vid: {"expressions": {exp_id: {"exp": text, "obj_id": "1"}},
                             "frames": ["00000", ...]}}}
      ROOT/<split>/JPEGImages/<vid>/<frame>.jpg
      ROOT/train/Annotations/<vid>/<frame>.png   (palette PNG: pixel value = object id)

  ``train`` has masks; ``valid`` has none in public: it is listed (without ``obj_id``) and
  must be scored by the official server. The competition's ``valid`` expressions also hold
  its 305 test videos; when ``meta_expressions/test/meta_expressions.json`` is present
  those are left out, leaving the 202 validation videos, as ReferFormer and MTTR do.
* **Ref-DAVIS17** (``ref-davis17``), in the Ref-YouTube-VOS layout that ReferFormer's
  ``tools/data/convert_davis_to_ytvos.py`` builds from DAVIS-2017 (Unsupervised,
  trainval 480p) and the text annotations of Khoreva et al.::

      ROOT/meta_expressions/<split>/meta_expressions.json   (as above, with "obj_id")
      ROOT/<split>/JPEGImages/<vid>/<frame>.jpg
      ROOT/<split>/Annotations/<vid>/<frame>.png   (DAVIS palette PNG; 255 = void)

  Splits ``train`` and ``valid``. The converter writes each object's four expressions in a
  fixed order (annotator 1 first-frame, annotator 1 full-video, annotator 2 first-frame,
  annotator 2 full-video), so expression ``k`` is tagged by ``k % 4`` (``annotator-1`` /
  ``annotator-2`` and ``first-frame`` / ``full-video``). The official protocol runs the
  DAVIS-2017 unsupervised evaluation once per annotator set and averages; we score each
  expression against its own object, which is what a referring method is asked for.
* **MeViS** (``mevis``; the MeViS repository's README and ``eval_mevis.py``)::

      ROOT/<split>/meta_expressions.json
           {"videos": {vid: {"expressions": {exp_id: {"exp": text, "obj_id": [..],
                                                      "anno_id": [..]}},
                             "frames": ["00000", ...]}}}
      ROOT/<split>/mask_dict.json    {str(anno_id): [COCO RLE or null, one per frame]}
      ROOT/<split>/JPEGImages/<vid>/<frame>.jpg

  ``train`` and ``valid_u`` have masks; ``valid`` has none in public (official server). An
  expression may name several objects: its ground truth is the union of their masks. A
  ``null`` entry is an object absent from that frame; every frame is scored. Tags
  ``single-object`` / ``multi-object`` (``no-target`` when ``anno_id`` is empty).
* **ReVOS** (``revos``; the ReVOS-api README and VISA's ``tools/eval_revos.py``)::

      ROOT/meta_expressions_<split>_.json   (as MeViS, plus "type_id" per expression)
      ROOT/mask_dict.json                   (train and valid together)
      ROOT/JPEGImages/<vid>/<frame>.jpg

  Splits ``valid`` and ``train``. ``type_id`` 0 is tagged ``referring``, 1 ``reasoning``,
  any other ``type-<n>``. The official "overall" figure is the mean of the referring and
  reasoning subsets' means (:attr:`VideoDatasetInfo.overall_from`), not the mean over all
  expressions; the other types enter no published figure.
* **ReasonVOS** (``reasonvos``; VideoLISA's ``BENCHMARK.md``, ``benchmark_check.py`` and
  ``evaluation/reason_vos/eval_reason_vos.py``)::

      ROOT/meta_expressions.json
           {"videos": {vid: {"source": "MeViS", "is_sent": bool, "frames": [...],
                             "expressions": {exp_id: {"exp_text": text, "obj_id": id}}}}}
      ROOT/JPEGImages/<vid>/<frame>.jpg
      ROOT/Annotations/<source>_<vid>_<obj_id>/<frame>.png   (binary: non-zero = object)

  One split, named ``valid`` as VideoLISA's loader names it. Only frames with a mask PNG are
  annotated (and scored). Tags: the source dataset in lower case (``mevis``, ``mose``,
  ``burst``, ``vipseg``) and ``sentence`` / ``phrase`` from ``is_sent``.

For ReVOS and ReasonVOS, ``ROOT`` may also be the folder holding ``ReVOS/`` or
``ReasonVOS/``. Frame names without an image suffix are read as ``<name>.jpg``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image, UnidentifiedImageError
from pycocotools import mask as mask_utils

from sam3_agent.runs.evaluation.samples import GroundTruth, read_json
from sam3_agent.runs.evaluation.video.catalog import VIDEO_DATASETS, VideoDatasetInfo
from sam3_agent.values.errors import DatasetError, ImageLoadError, UserError
from sam3_agent.values.images import image_size_as_displayed
from sam3_agent.values.text import one_line

__all__ = [
    "VIDEO_DATASETS",
    "VideoDatasetInfo",
    "VideoGroundTruthSource",
    "VideoSample",
    "load_video_samples",
]

logger = logging.getLogger(__name__)

FRAME_SUFFIXES = (".jpg", ".jpeg", ".png")


# --------------------------------------------------------------------------- samples


class VideoGroundTruthSource(Protocol):
    """Decodes a sample's ground truth one frame at a time."""

    def frames(self) -> Iterator[GroundTruth | None]:
        """One item per frame of the sample, in order: the frame's ground truth at the
        frame's resolution, or None for a frame without annotation. Raises
        :class:`DatasetError` on a broken file."""
        ...


@dataclass(frozen=True)
class VideoSample:
    """One (video, expression) pair to evaluate.

    Attributes:
        id: ``<split>/<video>/<expression>``; stable, unique within the dataset.
        dataset, split: as :data:`VIDEO_DATASETS` names them.
        video, expression: the ids the dataset's files use.
        frames_dir: the folder of the video's frames.
        frame_names: the frame files in ``frames_dir``, in temporal order.
        query: the text given to the agent.
        tags: subset labels for the breakdown.
        no_target: the expression names no object (its ground truth is empty everywhere).
        no_ground_truth: why this split cannot be scored here (None when it can).
    """

    id: str
    dataset: str
    split: str
    video: str
    expression: str
    frames_dir: Path
    frame_names: tuple[str, ...]
    query: str
    tags: tuple[str, ...] = ()
    no_target: bool = False
    no_ground_truth: str | None = None
    gt_source: VideoGroundTruthSource | None = field(default=None, compare=False, repr=False)

    @property
    def frame_paths(self) -> tuple[Path, ...]:
        return tuple(self.frames_dir / name for name in self.frame_names)

    @property
    def image_path(self) -> Path:
        """The video's frame folder: what the jobs engines group samples by
        (:class:`~sam3_agent.runs.jobs.base.Job`), so that a video's expressions run
        together on one worker and fall in one ``--shard``."""
        return self.frames_dir

    @property
    def has_ground_truth(self) -> bool:
        return self.gt_source is not None

    def ground_truth(self) -> Iterator[GroundTruth | None]:
        """The ground truth frame by frame (one item per :attr:`frame_names` entry; None for
        an unannotated frame), decoded as it is iterated.

        Raises:
            DatasetError: at once, when the split has no public ground truth (the message
                says where to score it); while iterating, when a mask file is unreadable or
                inconsistent.
        """
        if self.gt_source is None:
            reason = self.no_ground_truth or "no ground truth attached"
            raise DatasetError(f"sample {self.id}: {reason}")
        return self._frames(self.gt_source)

    def _frames(self, source: VideoGroundTruthSource) -> Iterator[GroundTruth | None]:
        count = 0
        for item in source.frames():
            count += 1
            if count > len(self.frame_names):
                break
            yield item
        if count != len(self.frame_names):
            raise DatasetError(
                f"sample {self.id}: the ground truth has {count} frames, the video "
                f"{len(self.frame_names)}"
            )


def load_video_samples(dataset: str, root: Path, split: str | None = None) -> list[VideoSample]:
    """The samples of ``dataset``'s ``split`` (its default when None) under ``root``.

    Raises:
        UserError: unknown dataset or split.
        DatasetError: missing, unreadable or inconsistent files.
    """
    info = VIDEO_DATASETS.get(dataset)
    if info is None:
        raise UserError(
            f"unknown video dataset {dataset!r}; choose one of {', '.join(VIDEO_DATASETS)}"
        )
    split = info.default_split if split is None else split
    if split not in info.splits:
        raise UserError(
            f"{info.title} has no split {split!r}; choose one of {', '.join(info.splits)}"
        )
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    loaders = {
        "ref-youtube-vos": _load_ref_youtube_vos,
        "ref-davis17": _load_ref_davis17,
        "mevis": _load_mevis,
        "revos": _load_revos,
        "reasonvos": _load_reasonvos,
    }
    samples = loaders[dataset](root, split, info)
    logger.info("%s %s: %d samples", info.title, split, len(samples))
    return samples


# --------------------------------------------------------------------------- JSON checks


def _require_file(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    return path


def _safe_name(value: Any, path: Path, where: str, what: str) -> str:
    """An id usable as one path component and inside a one-line message: no separators,
    no control characters, not ``.`` or ``..``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if (
        not isinstance(value, str)
        or not value
        or value in (".", "..")
        or any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    ):
        raise DatasetError(f"{path} ({where}): {what} must be a plain name, got {value!r:.80}")
    return value


def _videos(path: Path) -> dict[str, dict[str, Any]]:
    """The ``videos`` object of a meta-expressions file, each entry checked for an
    ``expressions`` object and a ``frames`` list of names."""
    doc = read_json(path)
    videos = doc.get("videos") if isinstance(doc, dict) else None
    if not isinstance(videos, dict):
        raise DatasetError(f"{path}: expected an object with a 'videos' object")
    checked: dict[str, dict[str, Any]] = {}
    for vid, entry in videos.items():
        _safe_name(vid, path, f"video {vid!r:.80}", "a video id")
        if not isinstance(entry, dict) or not isinstance(entry.get("expressions"), dict):
            raise DatasetError(f"{path} (video {vid}): expected an 'expressions' object")
        frames = entry.get("frames")
        if not isinstance(frames, list) or not frames:
            raise DatasetError(f"{path} (video {vid}): 'frames' must be a non-empty list")
        names = tuple(
            _frame_file(_safe_name(f, path, f"video {vid}", "a frame id")) for f in frames
        )
        if len(set(names)) != len(names):
            raise DatasetError(f"{path} (video {vid}): 'frames' lists a frame twice")
        for exp_id, exp in entry["expressions"].items():
            _safe_name(exp_id, path, f"video {vid}", "an expression id")
            if not isinstance(exp, dict):
                raise DatasetError(f"{path} (sample {vid}/{exp_id}): expected an object")
        checked[vid] = {**entry, "frames": names}
    return checked


def _frame_file(name: str) -> str:
    return name if Path(name).suffix.lower() in FRAME_SUFFIXES else f"{name}.jpg"


def _text(exp: Mapping[str, Any], key: str, path: Path, sid: str) -> str:
    text = exp.get(key)
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{path} (sample {sid}): '{key}' must be a non-empty string")
    return " ".join(text.split())


def _object_id(value: Any, path: Path, sid: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError):
        raise DatasetError(
            f"{path} (sample {sid}): 'obj_id' must be an integer, got {value!r:.80}"
        ) from None
    if not 0 < number < 255:
        raise DatasetError(
            f"{path} (sample {sid}): 'obj_id' {number} is not a palette index 1..254"
        )
    return number


def _anno_ids(exp: Mapping[str, Any], path: Path, sid: str) -> tuple[str, ...]:
    ids = exp.get("anno_id")
    if not isinstance(ids, list) or not all(
        isinstance(i, (int, str)) and not isinstance(i, bool) for i in ids
    ):
        raise DatasetError(f"{path} (sample {sid}): 'anno_id' must be a list of ids")
    return tuple(str(i) for i in ids)


def _frames_dir(images: Path, vid: str, sid: str) -> Path:
    frames_dir = images / vid
    if not frames_dir.is_dir():
        raise DatasetError(f"{frames_dir}: frame folder not found (sample {sid})")
    return frames_dir


def _nested_root(root: Path, marker: str, folder: str) -> Path:
    """``root``, or ``root/folder`` when only that one holds ``marker``."""
    if not (root / marker).exists() and (root / folder / marker).exists():
        return root / folder
    return root


# --------------------------------------------------------------------------- ground truth


def _frame_size(path: Path, sample: str) -> tuple[int, int]:
    """``(height, width)`` of a frame image, from its header."""
    try:
        return image_size_as_displayed(path)
    except ImageLoadError as e:
        raise DatasetError(f"{path} (sample {sample}): {one_line(e)}") from e


def _read_png(path: Path, sample: str, *, grey: bool) -> np.ndarray:
    """A mask PNG as a 2-D array: palette indices / values as stored, or (``grey``) the
    luminance, as OpenCV's greyscale read gives the benchmarks' evaluators."""
    try:
        with Image.open(path) as image:
            if grey:
                return np.asarray(image.convert("L"))
            if image.mode not in ("P", "L", "I", "I;16"):
                raise DatasetError(
                    f"{path} (sample {sample}): expected an indexed (palette) PNG, got mode "
                    f"{image.mode}"
                )
            return np.asarray(image)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise DatasetError(f"{path} (sample {sample}): cannot read mask: {one_line(e)}") from e


def _check_size(mask: np.ndarray, size: tuple[int, int], path: Path, sample: str) -> None:
    if mask.shape != size:
        raise DatasetError(
            f"{path} (sample {sample}): mask is {mask.shape[0]}x{mask.shape[1]}, the frames "
            f"{size[0]}x{size[1]}"
        )


@dataclass(frozen=True)
class PaletteMasks:
    """One object of palette PNGs (YouTube-VOS / DAVIS): ``<dir>/<frame stem>.png``, pixel
    value = object id. A frame without a PNG is unannotated. ``void`` pixels are left out
    of scoring."""

    annotations: Path
    frame_names: tuple[str, ...]
    object_id: int
    first_frame: Path
    sample: str
    void: int | None = None

    def frames(self) -> Iterator[GroundTruth | None]:
        pngs = _frame_pngs(self.annotations, self.frame_names, self.first_frame, self.sample)
        for labels in pngs:
            if labels is None:
                yield None
                continue
            ignore = labels == self.void if self.void is not None else None
            yield GroundTruth(
                mask=labels == self.object_id,
                ignore=ignore if ignore is not None and ignore.any() else None,
            )


@dataclass(frozen=True)
class BinaryMasks:
    """Binary mask PNGs (ReasonVOS): ``<dir>/<frame stem>.png``, non-zero = the object. A
    frame without a PNG is unannotated."""

    masks: Path
    frame_names: tuple[str, ...]
    first_frame: Path
    sample: str

    def frames(self) -> Iterator[GroundTruth | None]:
        pngs = _frame_pngs(self.masks, self.frame_names, self.first_frame, self.sample, grey=True)
        for grey in pngs:
            yield None if grey is None else GroundTruth(mask=grey > 0)


def _frame_pngs(
    directory: Path,
    frame_names: Sequence[str],
    first_frame: Path,
    sample: str,
    *,
    grey: bool = False,
) -> Iterator[np.ndarray | None]:
    """Each frame's ``<directory>/<frame stem>.png`` read in turn (None where there is none:
    an unannotated frame), checked to be the frame's size."""
    size: tuple[int, int] | None = None
    for name in frame_names:
        path = directory / f"{Path(name).stem}.png"
        if not path.is_file():
            yield None
            continue
        pixels = _read_png(path, sample, grey=grey)
        size = size or _frame_size(first_frame, sample)
        _check_size(pixels, size, path, sample)
        yield pixels


@dataclass(frozen=True)
class RleMasks:
    """The union of some objects' per-frame COCO RLEs (MeViS / ReVOS ``mask_dict.json``).

    ``tracks`` holds, per object, one RLE (or None: absent) per frame. Every frame is
    annotated; a frame where no object is present has an empty mask of the frames' size.
    """

    tracks: tuple[tuple[Any, ...], ...]
    frame_count: int
    first_frame: Path
    file: Path
    sample: str

    def frames(self) -> Iterator[GroundTruth | None]:
        size: tuple[int, int] | None = None
        for index in range(self.frame_count):
            union: np.ndarray | None = None
            for track in self.tracks:
                rle = track[index]
                if rle is None:
                    continue
                mask = _decode_rle(rle, self.file, self.sample, index)
                size = size or _frame_size(self.first_frame, self.sample)
                _check_size(mask, size, self.file, f"{self.sample}, frame {index}")
                union = mask if union is None else union | mask
            if union is None:
                size = size or _frame_size(self.first_frame, self.sample)
                union = np.zeros(size, dtype=bool)
            yield GroundTruth(mask=union)


def _decode_rle(rle: Any, file: Path, sample: str, frame: int) -> np.ndarray:
    where = f"{file} (sample {sample}, frame {frame})"
    if not isinstance(rle, dict):
        raise DatasetError(f"{where}: expected a COCO RLE object or null")
    size, counts = rle.get("size"), rle.get("counts")
    if (
        not isinstance(size, list)
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
    ):
        raise DatasetError(f"{where}: RLE 'size' must be [height, width]")
    try:
        if isinstance(counts, list):
            encoded = mask_utils.frPyObjects({"size": size, "counts": counts}, *size)
        elif isinstance(counts, str):
            encoded = {"size": size, "counts": counts.encode()}
        else:
            raise DatasetError(f"{where}: RLE 'counts' must be a string or a list")
        return np.asarray(mask_utils.decode(encoded), dtype=bool)
    except DatasetError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, OverflowError) as e:
        raise DatasetError(f"{where}: cannot decode RLE: {one_line(e)}") from e


# --------------------------------------------------------------------------- loaders


def _load_ref_youtube_vos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = _require_file(root / "meta_expressions" / split / "meta_expressions.json")
    videos = _videos(meta)
    if split == "valid":
        test_meta = root / "meta_expressions" / "test" / "meta_expressions.json"
        if test_meta.is_file():
            test_videos = set(_videos(test_meta))
            videos = {v: e for v, e in videos.items() if v not in test_videos}
        else:
            logger.warning(
                "%s not found: the valid expressions may include the competition's test videos",
                test_meta,
            )
    return _palette_samples(root, split, info, meta, videos, void=None, tag=lambda _: ())


def _load_ref_davis17(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = _require_file(root / "meta_expressions" / split / "meta_expressions.json")
    return _palette_samples(root, split, info, meta, _videos(meta), void=255, tag=_davis_tags)


def _davis_tags(exp_id: str) -> tuple[str, ...]:
    """ReferFormer's converter writes each object's expressions in this order."""
    if not exp_id.isdigit():
        return ()
    return (
        ("annotator-1", "first-frame"),
        ("annotator-1", "full-video"),
        ("annotator-2", "first-frame"),
        ("annotator-2", "full-video"),
    )[int(exp_id) % 4]


def _palette_samples(
    root: Path,
    split: str,
    info: VideoDatasetInfo,
    meta: Path,
    videos: Mapping[str, Mapping[str, Any]],
    *,
    void: int | None,
    tag: Callable[[str], tuple[str, ...]],
) -> list[VideoSample]:
    images = root / split / "JPEGImages"
    no_gt = info.no_public_ground_truth.get(split)
    annotations = root / split / "Annotations"
    if no_gt is None and not annotations.is_dir():
        raise DatasetError(f"{annotations}: annotation folder not found")
    samples = []
    for vid, entry in videos.items():
        frames: tuple[str, ...] = entry["frames"]
        for exp_id, exp in entry["expressions"].items():
            sid = f"{split}/{vid}/{exp_id}"
            frames_dir = _frames_dir(images, vid, sid)
            source = None
            if no_gt is None:
                source = PaletteMasks(
                    annotations / vid,
                    frames,
                    _object_id(exp.get("obj_id"), meta, sid),
                    frames_dir / frames[0],
                    sid,
                    void,
                )
            samples.append(
                VideoSample(
                    id=sid,
                    dataset=info.name,
                    split=split,
                    video=vid,
                    expression=str(exp_id),
                    frames_dir=frames_dir,
                    frame_names=frames,
                    query=_text(exp, "exp", meta, sid),
                    tags=tag(str(exp_id)),
                    no_ground_truth=no_gt,
                    gt_source=source,
                )
            )
    return samples


def _load_mevis(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    split_dir = root / split
    meta = _require_file(split_dir / "meta_expressions.json")
    return _rle_samples(
        split,
        info,
        meta,
        _videos(meta),
        images=split_dir / "JPEGImages",
        mask_dict=split_dir / "mask_dict.json",
        tag=_object_count_tag,
    )


def _object_count_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    if not anno_ids:
        return ("no-target",)
    return ("single-object",) if len(anno_ids) == 1 else ("multi-object",)


def _load_revos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    marker = f"meta_expressions_{split}_.json"
    root = _nested_root(root, marker, "ReVOS")
    meta = _require_file(root / marker)
    return _rle_samples(
        split,
        info,
        meta,
        _videos(meta),
        images=root / "JPEGImages",
        mask_dict=root / "mask_dict.json",
        tag=_revos_tag,
    )


def _revos_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    type_id = exp.get("type_id")
    if not isinstance(type_id, int) or isinstance(type_id, bool):
        return ()
    return ({0: "referring", 1: "reasoning"}.get(type_id, f"type-{type_id}"),)


def _rle_samples(
    split: str,
    info: VideoDatasetInfo,
    meta: Path,
    videos: Mapping[str, Mapping[str, Any]],
    *,
    images: Path,
    mask_dict: Path,
    tag: Callable[[Mapping[str, Any], Sequence[str]], tuple[str, ...]],
) -> list[VideoSample]:
    no_gt = info.no_public_ground_truth.get(split)
    listed = []
    for vid, entry in videos.items():
        for exp_id, exp in entry["expressions"].items():
            sid = f"{split}/{vid}/{exp_id}"
            anno_ids = () if no_gt else _anno_ids(exp, meta, sid)
            listed.append((vid, entry["frames"], str(exp_id), exp, sid, anno_ids))
    tracks = _tracks(mask_dict, {a for *_, ids in listed for a in ids}) if no_gt is None else {}
    samples = []
    for vid, frames, exp_id, exp, sid, anno_ids in listed:
        frames_dir = _frames_dir(images, vid, sid)
        source = None
        if no_gt is None:
            for anno in anno_ids:
                if anno not in tracks:
                    raise DatasetError(f"{mask_dict} (sample {sid}): no masks for anno_id {anno}")
                if len(tracks[anno]) != len(frames):
                    raise DatasetError(
                        f"{mask_dict} (sample {sid}): anno_id {anno} has "
                        f"{len(tracks[anno])} frames, the video {len(frames)}"
                    )
            source = RleMasks(
                tuple(tracks[a] for a in anno_ids),
                len(frames),
                frames_dir / frames[0],
                mask_dict,
                sid,
            )
        samples.append(
            VideoSample(
                id=sid,
                dataset=info.name,
                split=split,
                video=vid,
                expression=exp_id,
                frames_dir=frames_dir,
                frame_names=frames,
                query=_text(exp, "exp", meta, sid),
                tags=() if no_gt else tag(exp, anno_ids),
                no_target=no_gt is None and not anno_ids,
                no_ground_truth=no_gt,
                gt_source=source,
            )
        )
    return samples


def _tracks(path: Path, wanted: set[str]) -> dict[str, tuple[Any, ...]]:
    """The per-frame RLE lists of the ``wanted`` anno ids; the rest of the (large) file is
    dropped as soon as it is parsed."""
    doc = read_json(_require_file(path))
    if not isinstance(doc, dict):
        raise DatasetError(f"{path}: expected an object of anno_id -> per-frame masks")
    tracks = {}
    for anno in wanted:
        track = doc.get(anno)
        if track is None:
            continue  # reported with the sample that needs it
        if not isinstance(track, list):
            raise DatasetError(f"{path} (anno_id {anno}): expected a list of per-frame masks")
        tracks[anno] = tuple(track)
    return tracks


def _load_reasonvos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    root = _nested_root(root, "meta_expressions.json", "ReasonVOS")
    meta = _require_file(root / "meta_expressions.json")
    images = root / "JPEGImages"
    annotations = root / "Annotations"
    samples = []
    for vid, entry in _videos(meta).items():
        source_name = entry.get("source")
        if not isinstance(source_name, str) or not source_name.strip():
            raise DatasetError(f"{meta} (video {vid}): 'source' must be a non-empty string")
        is_sent = entry.get("is_sent")
        if not isinstance(is_sent, bool):
            raise DatasetError(f"{meta} (video {vid}): 'is_sent' must be true or false")
        frames: tuple[str, ...] = entry["frames"]
        for exp_id, exp in entry["expressions"].items():
            sid = f"{split}/{vid}/{exp_id}"
            frames_dir = _frames_dir(images, vid, sid)
            obj = exp.get("obj_id")
            if isinstance(obj, bool) or not isinstance(obj, (int, str)):
                raise DatasetError(f"{meta} (sample {sid}): 'obj_id' must be an id")
            obj = _safe_name(obj, meta, f"sample {sid}", "'obj_id'")
            # benchmark_check.py lower-cases the source; eval_reason_vos.py does not.
            candidates = [
                annotations / f"{s}_{vid}_{obj}" for s in (source_name, source_name.lower())
            ]
            masks = next((c for c in candidates if c.is_dir()), None)
            if masks is None:
                raise DatasetError(f"{candidates[-1]}: mask folder not found (sample {sid})")
            samples.append(
                VideoSample(
                    id=sid,
                    dataset=info.name,
                    split=split,
                    video=vid,
                    expression=str(exp_id),
                    frames_dir=frames_dir,
                    frame_names=frames,
                    query=_text(exp, "exp_text", meta, sid),
                    tags=(source_name.lower(), "sentence" if is_sent else "phrase"),
                    gt_source=BinaryMasks(masks, frames, frames_dir / frames[0], sid),
                )
            )
    return samples
