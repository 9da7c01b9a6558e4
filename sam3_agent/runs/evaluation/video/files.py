"""The video datasets' files, read and checked: the meta-expressions JSON, and ground truth
decoded a frame at a time from palette PNGs (YouTube-VOS, DAVIS), binary PNGs (ReasonVOS) or
COCO RLEs (MeViS, ReVOS); every bad file is a one-line ``DatasetError`` naming it."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image, UnidentifiedImageError
from pycocotools import mask as mask_utils

from sam3_agent.media.video import FRAME_SUFFIXES
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
