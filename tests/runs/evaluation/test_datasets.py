"""Dataset loaders on fixtures written in the published formats."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.runs.evaluation.datasets import load_samples
from sam3_agent.values.errors import DatasetError, UserError
from tests.support.eval_fixtures import write_grefcoco, write_reasonseg, write_refcoco
from tests.support.fakes import square_mask


@pytest.fixture
def reasonseg(tmp_path: Path) -> Path:
    return write_reasonseg(tmp_path / "ReasonSeg")


@pytest.fixture
def refcoco(tmp_path: Path) -> Path:
    return write_refcoco(tmp_path / "refer")


@pytest.fixture
def grefcoco(tmp_path: Path) -> Path:
    return write_grefcoco(tmp_path / "grefer")


def test_reasonseg_samples(reasonseg: Path) -> None:
    samples = load_samples("reasonseg", reasonseg, "val")
    assert [s.id for s in samples] == ["val/a#0", "val/b#0", "val/c#0", "val/d#0"]
    assert samples[0].query == "the left block"
    assert [s.tags for s in samples] == [("short",), ("long",), ("short",), ("long",)]
    assert samples[0].image_path == reasonseg / "val" / "a.jpg"


def test_reasonseg_all_texts(reasonseg: Path) -> None:
    samples = load_samples("reasonseg", reasonseg, "val", all_texts=True)
    assert [s.id for s in samples][:2] == ["val/a#0", "val/a#1"]
    assert samples[1].query == "block on the left side"
    assert len(samples) == 5


def test_reasonseg_ground_truth_fills_largest_first_and_skips_flag(reasonseg: Path) -> None:
    gt = load_samples("reasonseg", reasonseg, "val")[0].load_gt()
    assert gt.image_size == (40, 60)
    ignore = square_mask(40, 60, 5, 5, 5)
    # The ignore polygon is listed before the larger target: drawn after it, it survives.
    assert gt.ignore is not None
    np.testing.assert_array_equal(gt.ignore, ignore)
    np.testing.assert_array_equal(gt.mask, square_mask(40, 60, 0, 0, 20) & ~ignore)
    assert not gt.mask[:, 40:].any()  # the flag polygon is skipped


def test_reasonseg_without_ignore(reasonseg: Path) -> None:
    gt = load_samples("reasonseg", reasonseg, "val")[1].load_gt()
    assert gt.ignore is None
    assert gt.mask.sum() == 400


def test_reasonseg_cp1252_json(reasonseg: Path) -> None:
    path = reasonseg / "val" / "c.json"
    doc = json.loads(path.read_text())
    doc["text"] = ["the caf\u00e9 sign"]
    path.write_bytes(json.dumps(doc, ensure_ascii=False).encode("cp1252"))
    samples = load_samples("reasonseg", reasonseg, "val")
    assert samples[2].query == "the caf\u00e9 sign"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: "{not json", "invalid JSON"),
        (lambda d: json.dumps({**d, "text": []}), "'text'"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "is_sentence"}), "is_sentence"),
        (
            lambda d: json.dumps({**d, "shapes": [{"label": "person", "points": [[0, 0]]}]}),
            "unknown label",
        ),
        (
            lambda d: json.dumps({**d, "shapes": [{"label": "target", "points": "nope"}]}),
            "points",
        ),
    ],
)
def test_reasonseg_broken_json_names_file_and_sample(reasonseg: Path, edit, message: str) -> None:
    path = reasonseg / "val" / "b.json"
    path.write_text(edit(json.loads(path.read_text())))
    with pytest.raises(DatasetError, match=message) as info:
        for sample in load_samples("reasonseg", reasonseg, "val"):
            sample.load_gt()
    assert "b.json" in str(info.value)
    assert "val/b" in str(info.value)


def test_reasonseg_missing_annotation(reasonseg: Path) -> None:
    (reasonseg / "val" / "c.json").unlink()
    with pytest.raises(DatasetError, match=r"c\.json.*val/c"):
        load_samples("reasonseg", reasonseg, "val")


def test_reasonseg_unreadable_image(reasonseg: Path) -> None:
    (reasonseg / "val" / "b.jpg").write_bytes(b"not an image")
    samples = load_samples("reasonseg", reasonseg, "val")
    with pytest.raises(DatasetError, match=r"b\.jpg.*val/b"):
        samples[1].load_gt()


def test_reasonseg_missing_split(reasonseg: Path) -> None:
    with pytest.raises(DatasetError, match="test"):
        load_samples("reasonseg", reasonseg, "test")


def test_refcoco_samples(refcoco: Path) -> None:
    samples = load_samples("refcoco", refcoco, "val")
    assert [(s.id, s.query) for s in samples] == [
        ("val/1/11", "man in the middle"),
        ("val/1/12", "center person"),
        ("val/2/21", "top left cat"),
    ]
    assert samples[0].image_path == (
        refcoco / "images/mscoco/images/train2014/COCO_train2014_000000000001.jpg"
    )
    assert samples[0].image_path.is_file()


def test_refcoco_ground_truth_polygon_and_rle(refcoco: Path) -> None:
    samples = load_samples("refcoco", refcoco, "val") + load_samples("refcoco", refcoco, "testA")
    np.testing.assert_array_equal(samples[0].load_gt().mask, square_mask(40, 60, 10, 10, 20))
    np.testing.assert_array_equal(samples[2].load_gt().mask, square_mask(30, 50, 0, 0, 10))
    np.testing.assert_array_equal(samples[3].load_gt().mask, square_mask(30, 50, 20, 40, 10))


def test_refcoco_explicit_images_dir(refcoco: Path, tmp_path: Path) -> None:
    moved = tmp_path / "coco_train"
    (refcoco / "images/mscoco/images/train2014").rename(moved)
    with pytest.raises(DatasetError, match="`images="):
        load_samples("refcoco", refcoco, "val")
    samples = load_samples("refcoco", refcoco, "val", images=moved)
    assert samples[0].image_path.parent == moved


def test_refcocog_uses_umd_split(tmp_path: Path) -> None:
    root = write_refcoco(tmp_path / "refer", dataset="refcocog")
    assert len(load_samples("refcocog", root, "val")) == 3
    with pytest.raises(DatasetError, match=r"refs\(unc\)\.p"):
        load_samples("refcoco+", root, "val")


def test_refcoco_unknown_split_lists_available(refcoco: Path) -> None:
    with pytest.raises(DatasetError, match="available: testA, val"):
        load_samples("refcoco", refcoco, "testB")


def test_refcoco_broken_pickle(refcoco: Path) -> None:
    (refcoco / "refcoco" / "refs(unc).p").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match=r"refs\(unc\)\.p"):
        load_samples("refcoco", refcoco, "val")


def test_refcoco_dangling_annotation(refcoco: Path) -> None:
    path = refcoco / "refcoco" / "refs(unc).p"
    refs = pickle.loads(path.read_bytes())
    refs[1]["ann_id"] = 999
    path.write_bytes(pickle.dumps(refs))
    with pytest.raises(DatasetError, match=r"ref 2.*999.*instances\.json"):
        load_samples("refcoco", refcoco, "val")


def test_refcoco_bad_segmentation(refcoco: Path) -> None:
    path = refcoco / "refcoco" / "instances.json"
    doc = json.loads(path.read_text())
    doc["annotations"][0]["segmentation"] = "oops"
    path.write_text(json.dumps(doc))
    sample = load_samples("refcoco", refcoco, "val")[0]
    with pytest.raises(DatasetError, match=r"instances\.json.*val/1/11"):
        sample.load_gt()


def test_grefcoco_samples_and_no_target(grefcoco: Path) -> None:
    samples = load_samples("grefcoco", grefcoco, "val")
    assert [s.no_target for s in samples] == [False, True, True, False]
    assert [s.tags for s in samples][:2] == [("target",), ("no-target",)]
    both = samples[0].load_gt().mask
    np.testing.assert_array_equal(
        both, square_mask(40, 60, 0, 0, 10) | square_mask(40, 60, 20, 40, 10)
    )
    assert not samples[1].load_gt().mask.any()
    assert samples[1].load_gt().image_size == (40, 60)


def test_grefcoco_inconsistent_no_target(grefcoco: Path) -> None:
    path = grefcoco / "grefcoco" / "grefs(unc).json"
    refs = json.loads(path.read_text())
    refs[0]["no_target"] = True
    path.write_text(json.dumps(refs))
    with pytest.raises(DatasetError, match=r"grefs\(unc\)\.json.*ref 1.*no_target"):
        load_samples("grefcoco", grefcoco, "val")


def test_unknown_dataset_and_misplaced_option(reasonseg: Path) -> None:
    with pytest.raises(UserError, match="unknown dataset"):
        load_samples("pascal", reasonseg, "val")
    with pytest.raises(UserError, match="`all_texts`"):
        load_samples("refcoco", reasonseg, "val", all_texts=True)


def _rewrite_with_orientation(path: Path, orientation: int, *, keep_stored: bool = False) -> None:
    """Tag ``path`` with an EXIF orientation of 6 (a phone held upright).

    By default the pixels are stored rotated so a viewer shows them as they are now (the
    photo was annotated as displayed); ``keep_stored`` keeps the stored pixels (annotated
    as stored).
    """
    from PIL import Image

    with Image.open(path) as pil:
        shown = pil.convert("RGB")
    # Orientation 6 means "rotate 90 degrees clockwise to display": store it the other way.
    stored = shown if keep_stored else shown.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored.save(path, "JPEG", exif=exif.tobytes(), quality=95)


def test_reasonseg_is_scored_in_the_displayed_frame(reasonseg: Path) -> None:
    # LISA reads ReasonSeg with cv2.imread, which applies the EXIF orientation; its
    # polygons were drawn on the displayed image.
    from sam3_agent.values.images import load_image

    path = reasonseg / "val" / "a.jpg"
    _rewrite_with_orientation(path, 6)
    sample = load_samples("reasonseg", reasonseg, "val")[0]
    assert sample.exif_orientation
    gt = sample.load_gt()
    assert gt.image_size == (40, 60)
    assert load_image(path, exif_orientation=sample.exif_orientation).shape[:2] == gt.image_size


@pytest.mark.parametrize("dataset", ["refcoco", "grefcoco"])
def test_coco_datasets_are_scored_in_the_stored_frame(dataset: str, tmp_path: Path) -> None:
    # COCO's annotations and instances.json sizes are in the stored pixel frame.
    from sam3_agent.values.images import load_image

    root = write_refcoco(tmp_path / "r") if dataset == "refcoco" else write_grefcoco(tmp_path / "g")
    sample = load_samples(dataset, root, "val")[0]
    _rewrite_with_orientation(sample.image_path, 6, keep_stored=True)
    gt = sample.load_gt()
    assert not sample.exif_orientation
    stored = load_image(sample.image_path, exif_orientation=sample.exif_orientation)
    assert stored.shape[:2] == gt.image_size
    assert load_image(sample.image_path).shape[:2] == gt.image_size[::-1]


def test_runner_loads_each_sample_in_its_dataset_frame(reasonseg: Path, tmp_path: Path) -> None:
    import asyncio

    from sam3_agent.runs.evaluation.handler import EvalHandler
    from sam3_agent.runs.jobs.local import ImageHolder

    path = reasonseg / "val" / "a.jpg"
    _rewrite_with_orientation(path, 6)
    handler = EvalHandler(predictor=None, run_dir=tmp_path)  # type: ignore[arg-type]

    async def shapes() -> tuple[tuple[int, ...], tuple[int, ...]]:
        oriented = await ImageHolder({path: 1}, handler).get(path, exif_orientation=True)
        stored = await ImageHolder({path: 1}, handler).get(path, exif_orientation=False)
        return oriented.shape, stored.shape

    assert asyncio.run(shapes()) == ((40, 60, 3), (60, 40, 3))
