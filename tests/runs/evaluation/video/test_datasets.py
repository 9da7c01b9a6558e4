"""Video dataset loaders on tiny datasets written in each published layout."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS
from sam3_agent.runs.evaluation.video.datasets import VideoSample, load_video_samples
from sam3_agent.runs.evaluation.video.metrics import VideoAccumulator
from sam3_agent.values.errors import DatasetError, UserError
from tests.support.video_datasets import (
    FRAMES,
    H,
    W,
    make_mevis,
    make_reasonvos,
    make_ref_davis17,
    make_ref_youtube_vos,
    make_revos,
    object_mask,
    rle,
    write_palette_png,
)


def _by_id(samples: list[VideoSample]) -> dict[str, VideoSample]:
    return {s.id: s for s in samples}


def _masks(sample: VideoSample) -> list[np.ndarray | None]:
    return [None if gt is None else gt.mask for gt in sample.ground_truth()]


# --------------------------------------------------------------------------- each layout


def test_ref_youtube_vos_train(tmp_path: Path) -> None:
    samples = _by_id(load_video_samples("ref-youtube-vos", make_ref_youtube_vos(tmp_path), "train"))
    assert list(samples) == ["train/v1/0", "train/v1/1"]
    first = samples["train/v1/0"]
    assert first.query == "a red square"  # whitespace collapsed
    assert first.frames_dir == tmp_path / "train/JPEGImages/v1"
    assert first.frame_names == ("00000.jpg", "00001.jpg", "00002.jpg", "00003.jpg")
    assert all((first.frames_dir / name).is_file() for name in first.frame_names)
    masks = _masks(samples["train/v1/1"])
    # Object 2 on the annotated frames; frame 3 has no PNG and is unannotated.
    assert masks[3] is None
    for frame in range(3):
        assert np.array_equal(masks[frame], object_mask(2, frame))


def test_ref_youtube_vos_valid_is_listed_without_test_videos_and_refuses_scoring(
    tmp_path: Path,
) -> None:
    samples = load_video_samples("ref-youtube-vos", make_ref_youtube_vos(tmp_path))
    assert [s.id for s in samples] == ["valid/v2/0"]
    sample = samples[0]
    assert sample.gt_source is None
    with pytest.raises(DatasetError, match=r"valid/v2/0.*no public ground truth.*29139"):
        sample.ground_truth()


def test_ref_davis17_tags_and_void(tmp_path: Path) -> None:
    samples = load_video_samples("ref-davis17", make_ref_davis17(tmp_path), "valid")
    assert [s.tags for s in samples] == [
        ("annotator-1", "first-frame"),
        ("annotator-1", "full-video"),
        ("annotator-2", "first-frame"),
        ("annotator-2", "full-video"),
    ]
    frames = list(samples[0].ground_truth())
    assert len(frames) == FRAMES
    for frame, gt in enumerate(frames):
        assert gt is not None and gt.ignore is not None
        assert np.array_equal(gt.mask, object_mask(1, frame))
        assert gt.ignore.sum() == 9 and gt.ignore[-1, -1]


def test_mevis_valid_u_unions_objects_and_scores_absent_frames(tmp_path: Path) -> None:
    samples = _by_id(load_video_samples("mevis", make_mevis(tmp_path), "valid_u"))
    single, multi = samples["valid_u/m1/0"], samples["valid_u/m1/1"]
    assert (single.tags, multi.tags) == (("single-object",), ("multi-object",))
    single_masks, multi_masks = _masks(single), _masks(multi)
    for frame in range(FRAMES):
        top = object_mask(1, frame) if frame != 2 else np.zeros((H, W), bool)
        assert np.array_equal(single_masks[frame], top)  # frame 2: annotated, empty
        assert np.array_equal(multi_masks[frame], top | object_mask(2, frame))


def test_mevis_valid_has_no_public_ground_truth(tmp_path: Path) -> None:
    samples = load_video_samples("mevis", make_mevis(tmp_path), "valid")
    assert [s.id for s in samples] == ["valid/m2/0"]
    with pytest.raises(DatasetError, match=r"MeViS valid has no public ground truth.*15094"):
        samples[0].ground_truth()


def test_revos_subsets_and_no_target(tmp_path: Path) -> None:
    samples = _by_id(load_video_samples("revos", make_revos(tmp_path)))
    assert {sid: s.tags for sid, s in samples.items()} == {
        "valid/r1/0": ("referring",),
        "valid/r1/1": ("reasoning",),
        "valid/r1/2": ("type-2",),
    }
    assert samples["valid/r1/2"].no_target
    assert all(not m.any() for m in _masks(samples["valid/r1/2"]))  # type: ignore[union-attr]
    assert np.array_equal(_masks(samples["valid/r1/1"])[1], object_mask(2, 1))
    assert VIDEO_DATASETS["revos"].overall_from == ("referring", "reasoning")


def test_reasonvos_masks_only_on_annotated_frames(tmp_path: Path) -> None:
    (sample,) = load_video_samples("reasonvos", make_reasonvos(tmp_path))
    assert sample.id == "valid/q1/0"
    assert sample.query == "Which square is on top?"
    assert sample.tags == ("mevis", "sentence")
    masks = _masks(sample)
    assert masks[1] is None and masks[3] is None
    assert np.array_equal(masks[0], object_mask(1, 0))
    assert np.array_equal(masks[2], object_mask(1, 2))


def test_ground_truth_is_decoded_one_frame_at_a_time(tmp_path: Path) -> None:
    root = make_ref_davis17(tmp_path)
    sample = load_video_samples("ref-davis17", root, "valid")[0]
    frames = sample.ground_truth()
    first = next(frames)
    assert first is not None
    # Frame 1 is read only when asked for: breaking its file now is seen then, not before.
    (root / "valid/Annotations/d1/00001.png").write_bytes(b"not a png")
    with pytest.raises(DatasetError, match=r"00001\.png \(sample valid/d1/0\)"):
        next(frames)


def test_a_perfect_prediction_scores_one(tmp_path: Path) -> None:
    sample = _by_id(load_video_samples("mevis", make_mevis(tmp_path), "valid_u"))["valid_u/m1/1"]
    acc = VideoAccumulator()
    for gt in sample.ground_truth():
        acc.update(None if gt is None else gt.mask, gt)
    score = acc.result()
    assert (score.j, score.f, score.frames) == (1.0, 1.0, FRAMES)


def test_samples_survive_pickling(tmp_path: Path) -> None:
    for sample in load_video_samples("mevis", make_mevis(tmp_path), "valid_u"):
        copy = pickle.loads(pickle.dumps(sample))
        assert copy == sample
        assert all(np.array_equal(a, b) for a, b in zip(_masks(copy), _masks(sample), strict=True))


def test_unknown_dataset_or_split(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown video dataset"):
        load_video_samples("kinetics", tmp_path)
    with pytest.raises(UserError, match="MeViS has no split 'test'"):
        load_video_samples("mevis", tmp_path, "test")
    with pytest.raises(DatasetError, match="not a directory"):
        load_video_samples("mevis", tmp_path / "missing")


# --------------------------------------------------------------------------- broken files


def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


YT_TRAIN = "meta_expressions/train/meta_expressions.json"
MEVIS_META = "valid_u/meta_expressions.json"
MEVIS_MASKS = "valid_u/mask_dict.json"


def _set(*keys: str, value: object) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        target = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


def _rename_video(doc: dict) -> None:
    doc["videos"]["../escape"] = doc["videos"].pop("v1")


def _rename_expression(doc: dict) -> None:
    expressions = doc["videos"]["v1"]["expressions"]
    expressions["0\nforged line"] = expressions.pop("0")


BROKEN = [
    # (dataset, split, maker, file to break, how, expected in the message, at listing?)
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: p.write_text('{"videos": {'),
        "meta_expressions.json: invalid JSON",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: _edit_json(p, _set("videos", "v1", "frames", value="00000")),
        "(video v1): 'frames' must be a non-empty list",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: _edit_json(p, _rename_video),
        "a video id must be a plain name",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: _edit_json(p, _rename_expression),
        "(video v1): an expression id must be a plain name",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: _edit_json(p, _set("videos", "v1", "expressions", "1", "exp", value="  ")),
        "(sample train/v1/1): 'exp' must be a non-empty string",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        YT_TRAIN,
        lambda p: _edit_json(p, _set("videos", "v1", "expressions", "0", "obj_id", value="x")),
        "(sample train/v1/0): 'obj_id' must be an integer",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        "train/JPEGImages/v1/00000.jpg",
        lambda p: [q.unlink() for q in p.parent.iterdir()] and p.parent.rmdir(),
        "JPEGImages/v1: frame folder not found (sample train/v1/0)",
        True,
    ),
    (
        "ref-youtube-vos",
        "train",
        make_ref_youtube_vos,
        "train/Annotations/v1/00001.png",
        lambda p: Path(p).write_bytes(b"\x89PNG broken"),
        "00001.png (sample train/v1/0): cannot read mask",
        False,
    ),
    (
        "ref-davis17",
        "valid",
        make_ref_davis17,
        "valid/Annotations/d1/00000.png",
        lambda p: __import__("cv2").imwrite(str(p), np.zeros((H, W, 3), np.uint8) + 40),
        "expected an indexed (palette) PNG, got mode RGB",
        False,
    ),
    (
        "ref-davis17",
        "valid",
        make_ref_davis17,
        "valid/Annotations/d1/00002.png",
        lambda p: write_palette_png(p, np.zeros((H + 2, W), np.uint8)),
        "00002.png (sample valid/d1/0): mask is 50x64, the frames 48x64",
        False,
    ),
    (
        "mevis",
        "valid_u",
        make_mevis,
        MEVIS_META,
        lambda p: _edit_json(
            p, _set("videos", "m1", "expressions", "1", "anno_id", value=[10, 12])
        ),
        "mask_dict.json (sample valid_u/m1/1): no masks for anno_id 12",
        True,
    ),
    (
        "mevis",
        "valid_u",
        make_mevis,
        MEVIS_MASKS,
        lambda p: _edit_json(p, _set("11", value=[None])),
        "(sample valid_u/m1/1): anno_id 11 has 1 frames, the video 4",
        True,
    ),
    (
        "mevis",
        "valid_u",
        make_mevis,
        MEVIS_MASKS,
        lambda p: _edit_json(p, _set("10", value=[{"size": [H, W], "counts": 7}] * FRAMES)),
        "mask_dict.json (sample valid_u/m1/0, frame 0): RLE 'counts' must be",
        False,
    ),
    (
        "mevis",
        "valid_u",
        make_mevis,
        MEVIS_MASKS,
        lambda p: _edit_json(p, _set("10", value=[rle(np.ones((H, W + 1), bool))] * FRAMES)),
        "(sample valid_u/m1/0, frame 0): mask is 48x65, the frames 48x64",
        False,
    ),
    (
        "revos",
        "valid",
        make_revos,
        "ReVOS/meta_expressions_valid_.json",
        lambda p: p.unlink(),
        "meta_expressions_valid_.json: not found",
        True,
    ),
    (
        "revos",
        "valid",
        make_revos,
        "ReVOS/mask_dict.json",
        lambda p: p.write_text("[]"),
        "mask_dict.json: expected an object of anno_id",
        True,
    ),
    (
        "reasonvos",
        "valid",
        make_reasonvos,
        "ReasonVOS/meta_expressions.json",
        lambda p: _edit_json(p, _set("videos", "q1", "is_sent", value="yes")),
        "(video q1): 'is_sent' must be true or false",
        True,
    ),
    (
        "reasonvos",
        "valid",
        make_reasonvos,
        "ReasonVOS/meta_expressions.json",
        lambda p: _edit_json(p, _set("videos", "q1", "expressions", "0", "obj_id", value=2)),
        "mevis_q1_2: mask folder not found (sample valid/q1/0)",
        True,
    ),
]


@pytest.mark.parametrize(
    ("dataset", "split", "maker", "file", "breaks", "expected", "at_listing"),
    BROKEN,
    ids=[f"{b[0]}-{b[5][:40]}" for b in BROKEN],
)
def test_a_broken_file_is_one_line_naming_file_and_sample(
    tmp_path: Path,
    dataset: str,
    split: str,
    maker: Callable[[Path], Path],
    file: str,
    breaks: Callable[[Path], object],
    expected: str,
    at_listing: bool,
) -> None:
    root = maker(tmp_path)
    breaks(root / file)
    with pytest.raises(DatasetError) as info:
        for sample in load_video_samples(dataset, root, split):
            assert not at_listing, "listing should have failed"
            for _ in sample.ground_truth():
                pass
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_rle_counts_as_a_list_are_read(tmp_path: Path) -> None:
    # Uncompressed RLE (counts as a list of run lengths) is valid COCO too.
    root = make_mevis(tmp_path)
    column_major = object_mask(2, 0).flatten(order="F")
    runs, value, length = [], False, 0
    for pixel in column_major:
        if pixel != value:
            runs.append(length)
            value, length = pixel, 0
        length += 1
    runs.append(length)
    uncompressed = {"size": [H, W], "counts": runs}
    _edit_json(root / MEVIS_MASKS, _set("11", value=[uncompressed] * FRAMES))
    multi = _by_id(load_video_samples("mevis", root, "valid_u"))["valid_u/m1/1"]
    first = _masks(multi)[0]
    assert first is not None
    assert np.array_equal(first, object_mask(1, 0) | object_mask(2, 0))


def test_rle_write_helper_round_trips() -> None:
    from pycocotools import mask as mask_utils

    encoded = rle(object_mask(1, 1))
    decoded = mask_utils.decode({"size": encoded["size"], "counts": encoded["counts"].encode()})
    assert np.array_equal(decoded.astype(bool), object_mask(1, 1))
