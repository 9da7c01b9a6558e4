from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.rle import decode_rle, encode_rle


def make(n: int = 3) -> Detections:
    masks = np.zeros((n, 6, 8), dtype=bool)
    for i in range(n):
        masks[i, i : i + 2, i : i + 3] = True
    return Detections.from_masks(masks, np.linspace(0.9, 0.5, n))


@pytest.mark.parametrize(
    ("masks", "boxes", "scores", "match"),
    [
        (np.zeros((2, 4), bool), np.zeros((2, 4)), np.zeros(2), r"\(N, H, W\)"),
        (np.zeros((2, 4, 4), np.uint8), np.zeros((2, 4)), np.zeros(2), "bool"),
        (np.zeros((2, 4, 4), bool), np.zeros((3, 4)), np.zeros(2), "boxes"),
        (np.zeros((2, 4, 4), bool), np.zeros((2, 4)), np.zeros(3), "scores"),
    ],
)
def test_validation_says_what_was_expected(
    masks: np.ndarray, boxes: np.ndarray, scores: np.ndarray, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        Detections(masks, boxes, scores)


def test_indexing() -> None:
    d = make()
    assert len(d) == 3
    assert len(d[1]) == 1 and d[1].scores[0] == pytest.approx(0.7)
    assert d[np.array([True, False, True])].scores.tolist() == pytest.approx([0.9, 0.5])
    assert len(d[[]]) == 0 and d[[]].image_size == (6, 8)
    assert d[[2, 0]].scores.tolist() == pytest.approx([0.5, 0.9])
    with pytest.raises(IndexError):
        d[np.array([True])]


def test_empty_and_union() -> None:
    e = Detections.empty(4, 5)
    assert len(e) == 0 and e.union().shape == (4, 5) and not e.union().any()
    assert make().union().sum() == np.any(make().masks, axis=0).sum()


def test_rle_round_trip() -> None:
    d = make()
    rles = d.to_coco_rle()
    assert all(isinstance(r["counts"], str) for r in rles)
    back = Detections.from_coco_rle(rles, d.boxes, d.scores, d.image_size)
    np.testing.assert_array_equal(back.masks, d.masks)
    np.testing.assert_array_equal(decode_rle(encode_rle(d.masks[0])), d.masks[0])
    assert len(Detections.from_coco_rle([], [], [], (3, 3))) == 0


def test_tight_boxes_are_xyxy_with_exclusive_edges() -> None:
    m = np.zeros((1, 10, 10), dtype=bool)
    m[0, 2:5, 3:9] = True
    assert tight_boxes(m).tolist() == [[3, 2, 9, 5]]
    assert tight_boxes(np.zeros((1, 3, 3), bool)).tolist() == [[0, 0, 0, 0]]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 5).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, max(n - 1, 0)), max_size=n))
    ),
    st.integers(0, 2**16),
)
def test_candidates_select_and_checkpoint_form(case: tuple[int, list[int]], seed: int) -> None:
    from sam3_agent.agent.checkpoint.state import detections_from_json

    count, indices = case
    indices = indices if count else []
    rng = np.random.default_rng(seed)
    masks = rng.random((count, 6, 7)) > 0.5
    detections = Detections.from_masks(masks, rng.random(count).astype(np.float32))
    chosen = detections.select(indices)
    assert len(chosen) == len(indices)
    assert np.array_equal(chosen.masks, detections.masks[indices])
    back = detections_from_json(detections.to_state(), (6, 7))
    assert isinstance(back, Detections)
    assert np.array_equal(back.masks, detections.masks)
    assert np.allclose(back.scores, detections.scores) and np.allclose(back.boxes, detections.boxes)
