"""Tests for :mod:`sam3_agent.values.masks`: table cases plus a property test against a naïve,
full-array reference implementation of the post-processing rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sam3_agent.values.detections import Detections
from sam3_agent.values.masks import postprocess


def naive_kept(
    detections: Detections, score_threshold: float, overlap_threshold: float
) -> list[int]:
    """The rules (threshold, drop empty, greedy IoM overlap removal, order by score) written as
    plainly as possible on full arrays: 0-based indices, output order."""
    masks, scores = detections.masks, detections.scores
    candidates = [i for i in range(len(detections)) if scores[i] >= score_threshold]
    candidates = [i for i in candidates if masks[i].sum() > 0]
    candidates = sorted(candidates, key=lambda i: -float(scores[i]))
    kept: list[int] = []
    for i in candidates:
        duplicate = False
        for k in kept:
            inter = int(np.logical_and(masks[i], masks[k]).sum())
            smaller = min(int(masks[i].sum()), int(masks[k].sum()))
            if inter / smaller > overlap_threshold:
                duplicate = True
                break
        if not duplicate:
            kept.append(i)
    return kept


def rect(h: int, w: int, y0: int, x0: int, y1: int, x1: int) -> np.ndarray:
    m = np.zeros((h, w), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def dets(
    masks: list[np.ndarray], scores: list[float], boxes: np.ndarray | None = None
) -> Detections:
    stacked = np.stack(masks)
    if boxes is None:
        return Detections.from_masks(stacked, scores)
    return Detections(masks=stacked, boxes=boxes, scores=np.asarray(scores))


H, W = 20, 30
BIG = rect(H, W, 0, 0, 10, 10)  # area 100
INSIDE = rect(H, W, 2, 2, 5, 5)  # area 9, fully inside BIG
FAR = rect(H, W, 12, 20, 18, 28)
EMPTY = np.zeros((H, W), dtype=bool)
# 10-pixel strip sharing exactly 3 pixels with BIG: IoM = 3/10 = 0.3, not over 0.3.
STRIP_3 = rect(H, W, 9, 7, 10, 17)
STRIP_4 = rect(H, W, 9, 6, 10, 16)  # shares 4 pixels: IoM 0.4


@pytest.mark.parametrize(
    ("masks", "scores", "expected"),
    [
        pytest.param([BIG, FAR], [0.9, 0.49], [0], id="score-under-threshold-dropped"),
        pytest.param([BIG, FAR], [0.9, 0.5], [0, 1], id="score-at-threshold-kept"),
        pytest.param([EMPTY, FAR], [0.99, 0.6], [1], id="empty-mask-dropped"),
        pytest.param([BIG, INSIDE], [0.9, 0.8], [0], id="small-inside-big-dropped"),
        pytest.param([BIG, INSIDE], [0.7, 0.8], [1], id="big-around-small-dropped"),
        pytest.param([BIG, STRIP_3], [0.9, 0.8], [0, 1], id="iom-at-threshold-kept"),
        pytest.param([BIG, STRIP_4], [0.9, 0.8], [0], id="iom-over-threshold-dropped"),
        pytest.param([FAR, BIG], [0.6, 0.9], [1, 0], id="ordered-by-score"),
        pytest.param([FAR, BIG, INSIDE], [0.7, 0.7, 0.7], [0, 1], id="ties-keep-input-order"),
        pytest.param([BIG, BIG], [0.8, 0.8], [0], id="exact-duplicate-first-kept"),
        pytest.param([INSIDE, BIG, FAR], [0.1, 0.9, 0.2], [1], id="low-inside-mask-not-blocking"),
    ],
)
def test_postprocess_table(
    masks: list[np.ndarray], scores: list[float], expected: list[int]
) -> None:
    detections = dets(masks, scores)
    out = postprocess(detections)
    assert naive_kept(detections, 0.5, 0.3) == expected
    np.testing.assert_array_equal(out.masks, detections.masks[expected])
    np.testing.assert_array_equal(out.scores, detections.scores[expected])


def test_keeps_segmenter_boxes() -> None:
    loose = np.array([[0, 0, 15, 15], [18, 10, 30, 20]], dtype=np.float32)
    out = postprocess(dets([BIG, FAR], [0.6, 0.9], boxes=loose))
    np.testing.assert_array_equal(out.boxes, loose[[1, 0]])


@pytest.mark.parametrize("n", [0, 2])
def test_nothing_left_keeps_image_size(n: int) -> None:
    detections = Detections.empty(H, W) if n == 0 else dets([BIG, FAR], [0.1, 0.2])
    out = postprocess(detections)
    assert len(out) == 0
    assert out.image_size == (H, W)
    assert out.masks.shape == (0, H, W)


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_overlap_threshold_out_of_range(threshold: float) -> None:
    with pytest.raises(ValueError, match="overlap_threshold"):
        postprocess(dets([BIG], [0.9]), overlap_threshold=threshold)


def test_sorted_input_is_not_copied() -> None:
    detections = dets([BIG, FAR], [0.9, 0.8])
    assert np.shares_memory(postprocess(detections).masks, detections.masks)


def assert_matches_reference(detections: Detections, score_thr: float, overlap_thr: float) -> None:
    expected = naive_kept(detections, score_thr, overlap_thr)
    out = postprocess(detections, score_threshold=score_thr, overlap_threshold=overlap_thr)
    assert len(out) == len(expected)
    np.testing.assert_array_equal(out.masks, detections.masks[expected])
    np.testing.assert_array_equal(out.scores, detections.scores[expected])
    np.testing.assert_array_equal(out.boxes, detections.boxes[expected])


SCORES = st.sampled_from([0.0, 0.3, 0.5, 0.6, 0.75, 0.9, 1.0])
THRESHOLDS = st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 2 / 3, 0.75, 1.0]) | st.floats(0, 1)


@st.composite
def blob_detections(draw: st.DrawFn) -> Detections:
    """Rectangles thinned by random noise, some empty, some repeated: many exact ties."""
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    n = draw(st.integers(0, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    masks = np.zeros((n, h, w), dtype=bool)
    for i in range(n):
        kind = draw(st.sampled_from(["rect", "noisy", "empty", "repeat"]))
        if kind == "repeat" and i > 0:
            masks[i] = masks[draw(st.integers(0, i - 1))]
            continue
        if kind == "empty":
            continue
        y0, y1 = sorted(rng.integers(0, h + 1, size=2))
        x0, x1 = sorted(rng.integers(0, w + 1, size=2))
        density = 1.0 if kind == "rect" else rng.uniform(0.2, 0.9)
        masks[i, y0:y1, x0:x1] = rng.random((y1 - y0, x1 - x0)) < density
    scores = [draw(SCORES) for _ in range(n)]
    return Detections.from_masks(masks, scores)


@settings(max_examples=300, deadline=None)
@given(detections=blob_detections(), score_thr=SCORES, overlap_thr=THRESHOLDS)
def test_matches_naive_reference_on_blobs(
    detections: Detections, score_thr: float, overlap_thr: float
) -> None:
    assert_matches_reference(detections, score_thr, overlap_thr)


def pairwise_ioms(masks: np.ndarray) -> list[float]:
    """Every IoM value two non-empty masks reach, computed as the reference computes it."""
    areas = [int(m.sum()) for m in masks]
    return [
        int(np.logical_and(masks[i], masks[j]).sum()) / min(areas[i], areas[j])
        for i in range(len(masks))
        for j in range(i)
        if areas[i] and areas[j]
    ]


@settings(max_examples=200, deadline=None)
@given(detections=blob_detections(), data=st.data())
def test_matches_naive_reference_at_exact_ties(detections: Detections, data: st.DataObject) -> None:
    """Thresholds equal to an IoM that occurs: "exceeds" must mean strictly greater."""
    ioms = pairwise_ioms(detections.masks)
    overlap_thr = data.draw(st.sampled_from(ioms)) if ioms else 0.0
    assert_matches_reference(detections, 0.0, overlap_thr)


@settings(max_examples=150, deadline=None)
@given(
    masks=hnp.arrays(np.bool_, st.tuples(st.integers(0, 6), st.integers(1, 8), st.integers(1, 8))),
    data=st.data(),
    overlap_thr=THRESHOLDS,
)
def test_matches_naive_reference_on_arbitrary_masks(
    masks: np.ndarray, data: st.DataObject, overlap_thr: float
) -> None:
    scores = data.draw(st.lists(SCORES, min_size=len(masks), max_size=len(masks)))
    # The segmenter's boxes need not be tight; postprocess must carry them through unchanged.
    boxes = data.draw(hnp.arrays(np.float32, (len(masks), 4), elements=st.floats(0, 8, width=32)))
    detections = Detections(masks=masks, boxes=boxes, scores=np.asarray(scores))
    assert_matches_reference(detections, 0.5, overlap_thr)
