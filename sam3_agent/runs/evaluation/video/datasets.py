"""Referring and reasoning video datasets in their published layouts, as :class:`VideoSample`
values in the order of the dataset's files; ids ``<split>/<video id>/<expression id>``.

Layouts (file names as distributed)::

    ref-youtube-vos (ReferFormer docs/data.md; valid is scored by CodaLab 29139 only; its
      test videos are left out when meta_expressions/test/ is present, as ReferFormer does)
      ROOT/meta_expressions/<split>/meta_expressions.json
        {"videos": {vid: {"expressions": {exp_id: {"exp": text, "obj_id": "1"}},
                          "frames": ["00000", ...]}}}
      ROOT/<split>/JPEGImages/<vid>/<frame>.jpg
      ROOT/train/Annotations/<vid>/<frame>.png        palette PNG: pixel value = object id
    ref-davis17 (ReferFormer's convert_davis_to_ytvos.py): the same, 255 = void, with
      ROOT/<split>/Annotations; expression k tagged by k % 4: annotator-1 / annotator-2 and
      first-frame / full-video, the order the converter writes them in
    mevis (MeViS README, eval_mevis.py; valid is scored by its server only)
      ROOT/<split>/meta_expressions.json   as above, "obj_id": [..], "anno_id": [..]
      ROOT/<split>/mask_dict.json          {anno_id: [COCO RLE or null per frame]}
      ROOT/<split>/JPEGImages/<vid>/<frame>.jpg
      ground truth: the union of the objects' masks; tags single-object / multi-object /
      no-target (no anno_id)
    revos (ReVOS-api README, VISA tools/eval_revos.py)
      ROOT/meta_expressions_<split>_.json  as MeViS, plus "type_id": 0 referring, 1 reasoning
      ROOT/mask_dict.json, ROOT/JPEGImages/<vid>/<frame>.jpg
    reasonvos (VideoLISA BENCHMARK.md, eval_reason_vos.py; one split, valid)
      ROOT/meta_expressions.json  {"videos": {vid: {"source": "MeViS", "is_sent": bool,
                                   "frames": [..], "expressions": {id: {"exp_text", "obj_id"}}}}}
      ROOT/JPEGImages/<vid>/<frame>.jpg
      ROOT/Annotations/<source>_<vid>_<obj_id>/<frame>.png   non-zero = object; frames
      without a PNG are not scored; tags: the source in lower case, sentence / phrase

ReVOS's and ReasonVOS's ``ROOT`` may be the folder holding ``ReVOS/`` or ``ReasonVOS/``;
frame names without an image suffix are ``<name>.jpg``. Listing decodes no mask; every bad
file raises :class:`~sam3_agent.values.errors.DatasetError` naming it and the sample.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.runs.evaluation.catalog import VideoDatasetInfo, video_split
from sam3_agent.runs.evaluation.samples import GroundTruth
from sam3_agent.runs.evaluation.video.files import (
    BinaryMasks,
    PaletteMasks,
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
    order; ``no_target``: the expression names no object; ``no_ground_truth``: why the split
    cannot be scored here (None when it can)."""

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
        """The frame folder: the engines group samples by it, so a video's expressions run on
        one worker and fall in one shard."""
        return self.frames_dir

    def ground_truth(self) -> Iterator[GroundTruth | None]:
        """The ground truth per :attr:`frame_names` entry (None: not annotated), decoded as
        it is iterated."""
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
    """The samples of ``dataset``'s ``split`` (its default when None) under ``root``."""
    info, split = video_split(dataset, split)
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    loaders = {
        "ref-youtube-vos": _load_ref_youtube_vos, "ref-davis17": _load_ref_davis17,
        "mevis": _load_mevis, "revos": _load_revos, "reasonvos": _load_reasonvos,
    }  # fmt: skip
    samples = loaders[dataset](root, split, info)
    logger.info("%s %s: %d samples", info.title, split, len(samples))
    return samples


def _sample(
    info: VideoDatasetInfo, split: str, vid: str, exp_id: str, frames_dir: Path,
    frames: tuple[str, ...], query: str, **rest: Any,
) -> VideoSample:  # fmt: skip
    return VideoSample(
        id=f"{split}/{vid}/{exp_id}", dataset=info.name, split=split, video=vid,
        expression=exp_id, frames_dir=frames_dir, frame_names=frames, query=query, **rest,
    )  # fmt: skip


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
    return _palette_samples(root, split, info, meta, videos, void=None, tag=lambda _: ())


def _load_ref_davis17(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    meta = require_file(root / "meta_expressions" / split / "meta_expressions.json")
    return _palette_samples(root, split, info, meta, videos_of(meta), void=255, tag=_davis_tags)


def _davis_tags(exp_id: str) -> tuple[str, ...]:
    """ReferFormer's converter writes each object's expressions in this order."""
    if not exp_id.isdigit():
        return ()
    k = int(exp_id) % 4
    return f"annotator-{k // 2 + 1}", ("first-frame", "full-video")[k % 2]


def _palette_samples(
    root: Path, split: str, info: VideoDatasetInfo, meta: Path,
    videos: Mapping[str, Mapping[str, Any]], *, void: int | None,
    tag: Callable[[str], tuple[str, ...]],
) -> list[VideoSample]:  # fmt: skip
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
            frames_dir = frames_dir_of(images, vid, sid)
            source = None
            if no_gt is None:
                obj = object_id(exp.get("obj_id"), meta, sid)
                source = PaletteMasks(
                    annotations / vid, frames, obj, frames_dir / frames[0], sid, void
                )
            query = text_of(exp, "exp", meta, sid)
            samples.append(
                _sample(info, split, vid, str(exp_id), frames_dir, frames, query,
                        tags=tag(str(exp_id)), no_ground_truth=no_gt, gt_source=source)
            )  # fmt: skip
    return samples


def _load_mevis(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    split_dir = root / split
    meta = require_file(split_dir / "meta_expressions.json")
    return _rle_samples(split, info, meta, split_dir, tag=_object_count_tag)


def _object_count_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    if not anno_ids:
        return ("no-target",)
    return ("single-object",) if len(anno_ids) == 1 else ("multi-object",)


def _load_revos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    marker = f"meta_expressions_{split}_.json"
    root = nested_root(root, marker, "ReVOS")
    meta = require_file(root / marker)
    return _rle_samples(split, info, meta, root, tag=_revos_tag)


def _revos_tag(exp: Mapping[str, Any], anno_ids: Sequence[str]) -> tuple[str, ...]:
    type_id = exp.get("type_id")
    if not isinstance(type_id, int) or isinstance(type_id, bool):
        return ()
    return ({0: "referring", 1: "reasoning"}.get(type_id, f"type-{type_id}"),)


def _rle_samples(
    split: str, info: VideoDatasetInfo, meta: Path, base: Path, *,
    tag: Callable[[Mapping[str, Any], Sequence[str]], tuple[str, ...]],
) -> list[VideoSample]:  # fmt: skip
    images, mask_dict = base / "JPEGImages", base / "mask_dict.json"
    no_gt = info.no_public_ground_truth.get(split)
    listed = []
    for vid, entry in videos_of(meta).items():
        for exp_id, exp in entry["expressions"].items():
            sid = f"{split}/{vid}/{exp_id}"
            anno_ids = () if no_gt else anno_ids_of(exp, meta, sid)
            listed.append((vid, entry["frames"], str(exp_id), exp, sid, anno_ids))
    tracks = mask_tracks(mask_dict, {a for *_, ids in listed for a in ids}) if no_gt is None else {}
    samples = []
    for vid, frames, exp_id, exp, sid, anno_ids in listed:
        frames_dir = frames_dir_of(images, vid, sid)
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
            masks = tuple(tracks[a] for a in anno_ids)
            source = RleMasks(masks, len(frames), frames_dir / frames[0], mask_dict, sid)
        query = text_of(exp, "exp", meta, sid)
        samples.append(
            _sample(info, split, vid, exp_id, frames_dir, frames, query,
                    tags=() if no_gt else tag(exp, anno_ids),
                    no_target=no_gt is None and not anno_ids, no_ground_truth=no_gt,
                    gt_source=source)
        )  # fmt: skip
    return samples


def _load_reasonvos(root: Path, split: str, info: VideoDatasetInfo) -> list[VideoSample]:
    root = nested_root(root, "meta_expressions.json", "ReasonVOS")
    meta = require_file(root / "meta_expressions.json")
    images = root / "JPEGImages"
    annotations = root / "Annotations"
    samples = []
    for vid, entry in videos_of(meta).items():
        source_name = entry.get("source")
        if not isinstance(source_name, str) or not source_name.strip():
            raise DatasetError(f"{meta} (video {vid}): 'source' must be a non-empty string")
        is_sent = entry.get("is_sent")
        if not isinstance(is_sent, bool):
            raise DatasetError(f"{meta} (video {vid}): 'is_sent' must be true or false")
        frames: tuple[str, ...] = entry["frames"]
        for exp_id, exp in entry["expressions"].items():
            sid = f"{split}/{vid}/{exp_id}"
            frames_dir = frames_dir_of(images, vid, sid)
            obj = exp.get("obj_id")
            if isinstance(obj, bool) or not isinstance(obj, (int, str)):
                raise DatasetError(f"{meta} (sample {sid}): 'obj_id' must be an id")
            obj = safe_name(obj, meta, f"sample {sid}", "'obj_id'")
            # benchmark_check.py lower-cases the source; eval_reason_vos.py does not.
            candidates = [
                annotations / f"{s}_{vid}_{obj}" for s in (source_name, source_name.lower())
            ]
            masks = next((c for c in candidates if c.is_dir()), None)
            if masks is None:
                raise DatasetError(f"{candidates[-1]}: mask folder not found (sample {sid})")
            query = text_of(exp, "exp_text", meta, sid)
            samples.append(
                _sample(info, split, vid, str(exp_id), frames_dir, frames, query,
                        tags=(source_name.lower(), "sentence" if is_sent else "phrase"),
                        gt_source=BinaryMasks(masks, frames, frames_dir / frames[0], sid))
            )  # fmt: skip
    return samples
