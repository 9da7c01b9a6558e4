"""Referring and reasoning video datasets in their published layouts (docs/evaluation.md),
as :class:`VideoSample` values in file order; ids ``<split>/<video id>/<expression id>``.
Ground truth is decoded a frame at a time; a bad file is a one-line ``DatasetError``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sam3_agent.runs.evaluation.catalog import VideoDatasetInfo, video_split
from sam3_agent.runs.evaluation.samples import GroundTruth
from sam3_agent.runs.evaluation.video.files import (
    PngMasks,
    RleMasks,
    VideoGroundTruthSource,
    anno_ids_of,
    frames_dir_of,
    mask_tracks,
    nested_root,
    object_id,
    require_file,
    safe_name,
    text_of,
    videos_of,
)
from sam3_agent.values.errors import DatasetError

logger = logging.getLogger(__name__)


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
