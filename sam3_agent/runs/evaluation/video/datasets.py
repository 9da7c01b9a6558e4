"""Referring and reasoning video datasets in their published layouts (docs/evaluation.md),
as :class:`VideoSample` values in file order; ids ``<split>/<video id>/<expression id>``.
Ground truth is decoded a frame at a time; a bad file is a one-line ``DatasetError``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
from PIL import Image, UnidentifiedImageError
from pycocotools import mask as mask_utils

from sam3_agent.media.video import FRAME_SUFFIXES
from sam3_agent.runs.evaluation.catalog import VideoDatasetInfo, video_split
from sam3_agent.runs.evaluation.samples import GroundTruth, image_size, read_json
from sam3_agent.values.errors import DatasetError
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    return path


def safe_name(value: Any, path: Path, where: str, what: str) -> str:
    """An id usable as one path component and inside a one-line message: no separators,
    no control characters, not ``.`` or ``..``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    bad = any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in str(value))
    if not isinstance(value, str) or not value or value in (".", "..") or bad:
        raise DatasetError(f"{path} ({where}): {what} must be a plain name, got {value!r:.80}")
    return value


def videos_of(path: Path) -> dict[str, dict[str, Any]]:
    """The ``videos`` object of a meta-expressions file, each entry checked for an
    ``expressions`` object and a ``frames`` list of names."""
    doc = read_json(path)
    videos = doc.get("videos") if isinstance(doc, dict) else None
    if not isinstance(videos, dict):
        raise DatasetError(f"{path}: expected an object with a 'videos' object")
    checked: dict[str, dict[str, Any]] = {}
    for vid, entry in videos.items():
        safe_name(vid, path, f"video {vid!r:.80}", "a video id")
        if not isinstance(entry, dict) or not isinstance(entry.get("expressions"), dict):
            raise DatasetError(f"{path} (video {vid}): expected an 'expressions' object")
        frames = entry.get("frames")
        if not isinstance(frames, list) or not frames:
            raise DatasetError(f"{path} (video {vid}): 'frames' must be a non-empty list")
        names = tuple(_frame_file(safe_name(f, path, f"video {vid}", "a frame id")) for f in frames)
        if len(set(names)) != len(names):
            raise DatasetError(f"{path} (video {vid}): 'frames' lists a frame twice")
        for exp_id, exp in entry["expressions"].items():
            safe_name(exp_id, path, f"video {vid}", "an expression id")
            if not isinstance(exp, dict):
                raise DatasetError(f"{path} (sample {vid}/{exp_id}): expected an object")
        checked[vid] = {**entry, "frames": names}
    return checked


def _frame_file(name: str) -> str:
    return name if Path(name).suffix.lower() in FRAME_SUFFIXES else f"{name}.jpg"


def text_of(exp: Mapping[str, Any], key: str, path: Path, sid: str) -> str:
    text = exp.get(key)
    if not isinstance(text, str) or not text.strip():
        raise DatasetError(f"{path} (sample {sid}): '{key}' must be a non-empty string")
    return " ".join(text.split())


def object_id(value: Any, path: Path, sid: str) -> int:
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


def anno_ids_of(exp: Mapping[str, Any], path: Path, sid: str) -> tuple[str, ...]:
    ids = exp.get("anno_id")
    if not isinstance(ids, list) or not all(
        isinstance(i, (int, str)) and not isinstance(i, bool) for i in ids
    ):
        raise DatasetError(f"{path} (sample {sid}): 'anno_id' must be a list of ids")
    return tuple(str(i) for i in ids)


def frames_dir_of(images: Path, vid: str, sid: str) -> Path:
    frames_dir = images / vid
    if not frames_dir.is_dir():
        raise DatasetError(f"{frames_dir}: frame folder not found (sample {sid})")
    return frames_dir


def nested_root(root: Path, marker: str, folder: str) -> Path:
    """``root``, or ``root/folder`` when only that one holds ``marker``."""
    if not (root / marker).exists() and (root / folder / marker).exists():
        return root / folder
    return root


def mask_tracks(path: Path, wanted: set[str]) -> dict[str, tuple[Any, ...]]:
    """The per-frame RLE lists of the ``wanted`` anno ids (the rest of the file is dropped)."""
    doc = read_json(require_file(path))
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


class VideoGroundTruthSource(Protocol):
    """A sample's ground truth per frame name (None: not annotated), decoded a frame at a time
    at the resolution of ``first_frame``; ``sample`` is the id its errors name."""

    def frames(
        self, names: tuple[str, ...], first_frame: Path, sample: str
    ) -> Iterator[GroundTruth | None]: ...


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
class PngMasks:
    """One object's mask PNGs, ``<directory>/<frame stem>.png``: palette PNGs whose value
    ``object_id`` is the object (``void`` left out), or (``object_id`` None) non-zero ones."""

    directory: Path
    object_id: int | None = None
    void: int | None = None

    def frames(
        self, names: tuple[str, ...], first_frame: Path, sample: str
    ) -> Iterator[GroundTruth | None]:
        size: tuple[int, int] | None = None
        for name in names:
            path = self.directory / f"{Path(name).stem}.png"
            if not path.is_file():
                yield None
                continue
            pixels = _read_png(path, sample, grey=self.object_id is None)
            size = size or image_size(first_frame, sample)
            _check_size(pixels, size, path, sample)
            if self.object_id is None:
                yield GroundTruth(mask=pixels > 0)
                continue
            ignore = pixels == self.void if self.void is not None else None
            yield GroundTruth(
                mask=pixels == self.object_id,
                ignore=ignore if ignore is not None and ignore.any() else None,
            )


@dataclass(frozen=True)
class RleMasks:
    """The union of some objects' per-frame COCO RLEs (``tracks``: per object, an RLE or None
    per frame) from ``file``; every frame is annotated, empty where no object is."""

    tracks: tuple[tuple[Any, ...], ...]
    file: Path

    def frames(
        self, names: tuple[str, ...], first_frame: Path, sample: str
    ) -> Iterator[GroundTruth | None]:
        size: tuple[int, int] | None = None
        for index in range(len(names)):
            union: np.ndarray | None = None
            for track in self.tracks:
                rle = track[index]
                if rle is None:
                    continue
                mask = _decode_rle(rle, self.file, sample, index)
                size = size or image_size(first_frame, sample)
                _check_size(mask, size, self.file, f"{sample}, frame {index}")
                union = mask if union is None else union | mask
            if union is None:
                size = size or image_size(first_frame, sample)
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


@dataclass(frozen=True)
class VideoSample:
    """One (video, expression) pair: ``frame_names`` the files of ``frames_dir`` in temporal
    order; ``no_ground_truth``: why the split cannot be scored here (None when it can)."""

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
    def image_path(self) -> Path:
        """The frame folder: the engines group a video's expressions on one worker and shard."""
        return self.frames_dir

    def ground_truth(self) -> Iterator[GroundTruth | None]:
        """The ground truth per :attr:`frame_names` entry (None: not annotated), decoded lazily."""
        if self.gt_source is None:
            reason = self.no_ground_truth or "no ground truth attached"
            raise DatasetError(f"sample {self.id}: {reason}")
        first_frame = self.frames_dir / self.frame_names[0]
        return self.gt_source.frames(self.frame_names, first_frame, self.id)


def load_video_samples(dataset: str, root: Path, split: str | None = None) -> list[VideoSample]:
    """The samples of ``dataset``'s ``split`` (its default when None) under ``root``."""
    info, split = video_split(dataset, split)
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    samples = _LOADERS[dataset](root, split, info)
    logger.info("%s %s: %d samples", info.title, split, len(samples))
    return samples


class _Expression(NamedTuple):
    video: str
    frames: tuple[str, ...]
    id: str
    doc: Mapping[str, Any]
    sample_id: str


@dataclass(frozen=True)
class _Split:
    """What every sample of one split shares: dataset, name, meta file, frame folders' folder."""

    info: VideoDatasetInfo
    name: str
    meta: Path
    images: Path

    @property
    def no_gt(self) -> str | None:
        """Why the split cannot be scored here (None: it can)."""
        return self.info.no_public_ground_truth.get(self.name)

    def expressions(self, videos: Mapping[str, Mapping[str, Any]]) -> Iterator[_Expression]:
        """Every expression of ``videos`` (the checked meta file's), in file order."""
        for vid, entry in videos.items():
            for exp_id, exp in entry["expressions"].items():
                yield _Expression(
                    vid, entry["frames"], str(exp_id), exp, f"{self.name}/{vid}/{exp_id}"
                )

    def sample(self, e: _Expression, text_key: str = "exp", **rest: Any) -> VideoSample:
        """The expression's sample, its frame folder and query checked (no ground truth yet)."""
        return VideoSample(
            id=e.sample_id,
            dataset=self.info.name,
            split=self.name,
            video=e.video,
            expression=e.id,
            frames_dir=frames_dir_of(self.images, e.video, e.sample_id),
            frame_names=e.frames,
            query=text_of(e.doc, text_key, self.meta, e.sample_id),
            no_ground_truth=self.no_gt,
            **rest,
        )


def _load_ref_youtube_vos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = require_file(root / "meta_expressions" / split / "meta_expressions.json")
    videos = videos_of(meta)
    if split == "valid":
        test_meta = root / "meta_expressions" / "test" / "meta_expressions.json"
        if test_meta.is_file():
            test_videos = set(videos_of(test_meta))
            videos = {v: e for v, e in videos.items() if v not in test_videos}
        else:
            logger.warning(
                "%s not found: the valid expressions may include the competition's test videos",
                test_meta,
            )
    return _palette_samples(root, _Split(info, split, meta, root / split / "JPEGImages"), videos)


def _load_ref_davis17(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = require_file(root / "meta_expressions" / split / "meta_expressions.json")
    listing = _Split(info, split, meta, root / split / "JPEGImages")
    return _palette_samples(root, listing, videos_of(meta), void=255, tag=_davis_tags)


def _davis_tags(exp_id: str) -> tuple[str, ...]:
    """ReferFormer's converter writes each object's expressions in this order."""
    if not exp_id.isdigit():
        return ()
    k = int(exp_id) % 4
    return f"annotator-{k // 2 + 1}", ("first-frame", "full-video")[k % 2]


def _palette_samples(
    root: Path,
    split: _Split,
    videos: Mapping[str, Mapping[str, Any]],
    *,
    void: int | None = None,
    tag: Callable[[str], tuple[str, ...]] = lambda _: (),
) -> list[VideoSample]:
    annotations = root / split.name / "Annotations"
    if split.no_gt is None and not annotations.is_dir():
        raise DatasetError(f"{annotations}: annotation folder not found")
    samples = []
    for e in split.expressions(videos):
        masks = None
        if split.no_gt is None:
            obj = object_id(e.doc.get("obj_id"), split.meta, e.sample_id)
            masks = PngMasks(annotations / e.video, obj, void)
        samples.append(split.sample(e, tags=tag(e.id), gt_source=masks))
    return samples


def _load_mevis(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = require_file(root / split / "meta_expressions.json")
    return _rle_samples(_Split(info, split, meta, root / split / "JPEGImages"), _object_count_tag)


def _object_count_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    if not anno_ids:
        return ("no-target",)
    return ("single-object",) if len(anno_ids) == 1 else ("multi-object",)


def _load_revos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    marker = f"meta_expressions_{split}_.json"
    root = nested_root(root, marker, "ReVOS")
    meta = require_file(root / marker)
    return _rle_samples(_Split(info, split, meta, root / "JPEGImages"), _revos_tag)


def _revos_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    type_id = exp.get("type_id")
    if not isinstance(type_id, int) or isinstance(type_id, bool):
        return ()
    return ({0: "referring", 1: "reasoning"}.get(type_id, f"type-{type_id}"),)


def _rle_samples(
    split: _Split, tag: Callable[[Mapping[str, Any], Sequence[str]], tuple[str, ...]]
) -> list[VideoSample]:
    """The samples of a split whose masks are COCO RLEs in ``mask_dict.json``, by ``anno_id``."""
    mask_dict, no_gt = split.images.parent / "mask_dict.json", split.no_gt
    listed = [
        (e, () if no_gt else anno_ids_of(e.doc, split.meta, e.sample_id))
        for e in split.expressions(videos_of(split.meta))
    ]
    tracks = mask_tracks(mask_dict, {a for _, ids in listed for a in ids}) if no_gt is None else {}
    samples = []
    for e, anno_ids in listed:
        masks = None
        if no_gt is None:
            where = f"{mask_dict} (sample {e.sample_id})"
            for anno in anno_ids:
                if anno not in tracks:
                    raise DatasetError(f"{where}: no masks for anno_id {anno}")
                if len(tracks[anno]) != len(e.frames):
                    frames = f"{len(tracks[anno])} frames, the video {len(e.frames)}"
                    raise DatasetError(f"{where}: anno_id {anno} has {frames}")
            masks = RleMasks(tuple(tracks[a] for a in anno_ids), mask_dict)
        tags = () if no_gt else tag(e.doc, anno_ids)
        no_target = no_gt is None and not anno_ids
        samples.append(split.sample(e, tags=tags, no_target=no_target, gt_source=masks))
    return samples


def _load_reasonvos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    root = nested_root(root, "meta_expressions.json", "ReasonVOS")
    listing = _Split(info, split, require_file(root / "meta_expressions.json"), root / "JPEGImages")
    meta, videos = listing.meta, videos_of(listing.meta)
    kinds: dict[str, tuple[str, bool]] = {}  # video id -> (source dataset, is a sentence)
    for vid, entry in videos.items():
        source_name = entry.get("source")
        if not isinstance(source_name, str) or not source_name.strip():
            raise DatasetError(f"{meta} (video {vid}): 'source' must be a non-empty string")
        is_sent = entry.get("is_sent")
        if not isinstance(is_sent, bool):
            raise DatasetError(f"{meta} (video {vid}): 'is_sent' must be true or false")
        kinds[vid] = source_name, is_sent
    samples = []
    for e in listing.expressions(videos):
        source_name, is_sent = kinds[e.video]
        obj = e.doc.get("obj_id")
        if isinstance(obj, bool) or not isinstance(obj, (int, str)):
            raise DatasetError(f"{meta} (sample {e.sample_id}): 'obj_id' must be an id")
        obj = safe_name(obj, meta, f"sample {e.sample_id}", "'obj_id'")
        # benchmark_check.py lower-cases the source; eval_reason_vos.py does not.
        candidates = [
            root / "Annotations" / f"{s}_{e.video}_{obj}"
            for s in (source_name, source_name.lower())
        ]
        masks = next((c for c in candidates if c.is_dir()), None)
        if masks is None:
            raise DatasetError(f"{candidates[-1]}: mask folder not found (sample {e.sample_id})")
        tags = (source_name.lower(), "sentence" if is_sent else "phrase")
        samples.append(listing.sample(e, "exp_text", tags=tags, gt_source=PngMasks(masks)))
    return samples


_LOADERS: dict[str, Callable[[Path, str, VideoDatasetInfo], list[VideoSample]]] = {
    "ref-youtube-vos": _load_ref_youtube_vos,
    "ref-davis17": _load_ref_davis17,
    "mevis": _load_mevis,
    "revos": _load_revos,
    "reasonvos": _load_reasonvos,
}
