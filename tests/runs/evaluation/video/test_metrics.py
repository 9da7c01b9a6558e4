"""J, F and J&F against values worked out by hand, and their properties on any masks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sam3_agent.runs.evaluation.samples import GroundTruth
from sam3_agent.runs.evaluation.video.metrics import (
    ScoredVideo,
    VideoAccumulator,
    VideoScore,
    boundary_f,
    boundary_map,
    boundary_radius,
    breakdown,
    region_similarity,
    score_frame,
    summarize,
)
from tests.support.fakes import square_mask


def _square(dy: int = 0, dx: int = 0, size: int = 20) -> np.ndarray:
    """A ``size`` square at (20 + dy, 20 + dx) in a 100 x 100 frame."""
    return square_mask(100, 100, 20 + dy, 20 + dx, size)


# --------------------------------------------------------------------------- J by hand


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        # 20x20 squares d pixels apart horizontally: I = 20 (20 - d), U = 20 (20 + d).
        (_square(dx=0), _square(), Fraction(1)),
        (_square(dx=1), _square(), Fraction(19, 21)),
        (_square(dx=3), _square(), Fraction(17, 23)),
        (_square(dx=10), _square(), Fraction(1, 3)),
        # 10x10 squares offset by (2, 3): I = 8 * 7 = 56, U = 200 - 56 = 144.
        (_square(2, 3, size=10), _square(size=10), Fraction(7, 18)),
        # Touching but disjoint: I = 0.
        (_square(dx=20), _square(), Fraction(0)),
        # A 10x10 inside a 20x20: 100 / 400.
        (_square(size=10), _square(), Fraction(1, 4)),
        # Both empty: 1 by convention; one empty: 0.
        (np.zeros((100, 100), bool), np.zeros((100, 100), bool), Fraction(1)),
        (np.zeros((100, 100), bool), _square(), Fraction(0)),
    ],
)
def test_region_similarity_exact_fractions(
    pred: np.ndarray, gt: np.ndarray, expected: Fraction
) -> None:
    assert region_similarity(pred, gt) == float(expected)


def test_void_pixels_leave_both_counts() -> None:
    # Void = the first 5 columns of the 20x20 target: target 300 valid px; a 20x10 prediction
    # over columns 20..29 keeps 20x5 valid px, all inside the target.
    void = np.zeros((100, 100), bool)
    void[:, 20:25] = True
    pred = square_mask(100, 100, 20, 20, 20) & (np.arange(100) < 30)[None, :]
    assert region_similarity(pred, _square(), void) == 100 / 300


# --------------------------------------------------------------------------- F by hand


def test_boundary_of_a_square_is_the_outline_shifted_towards_the_origin() -> None:
    # seg2bmap marks pixels that differ from their right, lower or lower-right neighbour,
    # so an s x s square at (20, 20) gets the outline of the (s+1) x (s+1) square at (19, 19):
    # 4 (s + 1) - 4 = 4 s pixels.
    outline = np.zeros((100, 100), bool)
    outline[19, 19:40] = outline[39, 19:40] = True
    outline[19:40, 19] = outline[19:40, 39] = True
    contour = boundary_map(_square())
    assert np.array_equal(contour, outline)
    assert contour.sum() == 80


def test_the_image_border_is_not_a_contour() -> None:
    assert not boundary_map(np.ones((7, 9), bool)).any()
    # A mask on the right half: only the left edge is a contour.
    half = np.zeros((6, 8), bool)
    half[:, 4:] = True
    assert np.array_equal(np.nonzero(boundary_map(half).any(axis=0))[0], [3])


@pytest.mark.parametrize(
    ("height", "width", "radius"),
    [
        (100, 100, 2),  # 0.008 * 141.4 = 1.13
        (480, 854, 8),  # DAVIS 480p: 0.008 * 979.6 = 7.84
        (720, 1280, 12),  # YouTube-VOS 720p: 0.008 * 1468.6 = 11.75
        (1, 1, 1),
    ],
)
def test_boundary_radius_is_the_ceiling_of_the_diagonal_share(
    height: int, width: int, radius: int
) -> None:
    assert boundary_radius(height, width) == radius


def test_boundary_radius_in_pixels_and_bad_values() -> None:
    assert boundary_radius(100, 100, 3) == 3
    for bad in (0, -0.1, 2.5):
        with pytest.raises(ValueError):
            boundary_radius(100, 100, bad)


@pytest.mark.parametrize(
    ("dx", "expected"),
    [
        # Within the radius (2 px in a 100 x 100 frame) every contour pixel is matched.
        (0, 1.0),
        (1, 1.0),
        (2, 1.0),
        # 3 px apart. The predicted outline spans rows 19..39, columns 22..42 (80 px):
        # - top and bottom rows, x = 22..42: matched up to x = 41 (the true rows end at
        #   x = 39, 2 px away): 20 + 20;
        # - left column x = 22, rows 20..38: 3 px from the true left column, but rows 20, 21
        #   and 37, 38 lie within 2 px of the true top / bottom rows: 4;
        # - right column x = 42, rows 20..38: 3 px from x = 39, and (20, 42) is sqrt(10)
        #   from (19, 39): 0.
        # Precision = 44 / 80, and recall the same by symmetry: F = 0.55.
        (3, 44 / 80),
        # 4 px: top / bottom rows x = 23..43 matched up to 41 (19 + 19), left column 4,
        # right column 0: 42 / 80.
        (4, 42 / 80),
    ],
)
def test_boundary_f_of_shifted_squares(dx: int, expected: float) -> None:
    assert boundary_f(_square(dx=dx), _square()) == pytest.approx(expected, abs=1e-12)


def test_boundary_f_empty_and_full_masks() -> None:
    empty = np.zeros((50, 60), bool)
    full = np.ones((50, 60), bool)
    square = square_mask(50, 60, 10, 10, 10)
    assert boundary_f(empty, empty) == 1.0
    assert boundary_f(square, empty) == 0.0
    assert boundary_f(empty, square) == 0.0
    # DAVIS's quirk, kept on purpose: a full-frame mask has no contour, so it compares with
    # an empty one as "both without contour".
    assert boundary_f(full, empty) == 1.0
    assert region_similarity(full, empty) == 0.0


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        boundary_f(np.zeros((4, 5), bool), np.zeros((5, 4), bool))
    with pytest.raises(ValueError, match="shapes differ"):
        region_similarity(np.zeros((4, 5), bool), np.zeros((4, 6), bool))
    with pytest.raises(ValueError, match="non-empty"):
        boundary_map(np.zeros((0, 3), bool))


# --------------------------------------------------------------------------- properties


def _reference_contour(mask: np.ndarray) -> np.ndarray:
    """seg2bmap written pixel by pixel from its definition."""
    h, w = mask.shape
    out = np.zeros_like(mask)
    for y in range(h):
        for x in range(w):
            if y == h - 1 and x == w - 1:
                continue
            if y == h - 1:
                neighbours = [(y, x + 1)]
            elif x == w - 1:
                neighbours = [(y + 1, x)]
            else:
                neighbours = [(y, x + 1), (y + 1, x), (y + 1, x + 1)]
            out[y, x] = any(mask[p] != mask[y, x] for p in neighbours)
    return out


def _reference_f(pred: np.ndarray, gt: np.ndarray) -> float:
    """F from the definition with explicit distances, no morphology."""
    radius = math.ceil(0.008 * math.hypot(*gt.shape))
    a, b = np.argwhere(_reference_contour(pred)), np.argwhere(_reference_contour(gt))
    if len(a) == 0 or len(b) == 0:
        return 1.0 if len(a) == len(b) else 0.0
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    precision = (d2.min(axis=1) <= radius**2).mean()
    recall = (d2.min(axis=0) <= radius**2).mean()
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _mask_pairs(max_side: int = 40) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    return st.tuples(st.integers(1, max_side), st.integers(1, max_side)).flatmap(
        lambda hw: st.tuples(arrays(bool, hw), arrays(bool, hw))
    )


@settings(max_examples=150, deadline=None)
@given(_mask_pairs(24))
def test_f_matches_the_definition_computed_by_brute_force(
    pair: tuple[np.ndarray, np.ndarray],
) -> None:
    pred, gt = pair
    assert np.array_equal(boundary_map(pred), _reference_contour(pred))
    assert boundary_f(pred, gt) == pytest.approx(_reference_f(pred, gt), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(_mask_pairs())
def test_scores_are_bounded_and_symmetric(pair: tuple[np.ndarray, np.ndarray]) -> None:
    pred, gt = pair
    j, f = region_similarity(pred, gt), boundary_f(pred, gt)
    assert 0.0 <= j <= 1.0 and 0.0 <= f <= 1.0
    assert j == region_similarity(gt, pred)
    assert f == pytest.approx(boundary_f(gt, pred), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(arrays(bool, st.tuples(st.integers(1, 40), st.integers(1, 40))))
def test_identical_masks_score_one(mask: np.ndarray) -> None:
    assert region_similarity(mask, mask) == 1.0
    assert boundary_f(mask, mask) == 1.0


@settings(max_examples=100, deadline=None)
@given(
    st.integers(60, 200),
    st.integers(1, 20),
    st.integers(1, 20),
    st.integers(0, 30),
    st.integers(0, 30),
)
def test_disjoint_masks_far_apart_score_zero(
    height: int, w_left: int, w_right: int, y_left: int, y_right: int
) -> None:
    # Two rectangles in a 200-pixel-wide frame, their contours more than the radius apart.
    width = 200
    radius = boundary_radius(height, width)
    pred = np.zeros((height, width), bool)
    gt = np.zeros((height, width), bool)
    pred[y_left : y_left + 20, 1 : 1 + w_left] = True
    gt[y_right : y_right + 20, width - 1 - w_right : width - 1] = True
    assert (width - 2 - w_right) - (1 + w_left) > radius + 1
    assert region_similarity(pred, gt) == 0.0
    assert boundary_f(pred, gt) == 0.0


# --------------------------------------------------------------------------- videos


def _gt(mask: np.ndarray) -> GroundTruth:
    return GroundTruth(mask=mask)


def test_video_means_over_annotated_frames_only() -> None:
    empty = np.zeros((100, 100), bool)
    acc = VideoAccumulator()
    # Frame 0: exact (J 1, F 1); frame 1: unannotated, skipped whatever was predicted;
    # frame 2: shifted by 3 (J 17/23, F 0.55); frame 3: nothing predicted for a present
    # object (J 0, F 0); frame 4: object absent, nothing predicted (J 1, F 1).
    frames = [
        (_square(), _gt(_square())),
        (_square(dx=40), None),
        (_square(dx=3), _gt(_square())),
        (None, _gt(_square())),
        (None, _gt(empty)),
    ]
    scores = [acc.update(p, g) for p, g in frames]
    assert scores[1] is None
    result = acc.result()
    assert result.frames == 4
    assert result.j == pytest.approx((1 + 17 / 23 + 0 + 1) / 4)
    assert result.f == pytest.approx((1 + 0.55 + 0 + 1) / 4)
    assert result.jf == pytest.approx((result.j + result.f) / 2)


def test_video_without_annotated_frames_or_with_mismatched_shapes_is_refused() -> None:
    with pytest.raises(ValueError, match="no annotated frame"):
        VideoAccumulator().result()
    with pytest.raises(ValueError, match="shapes differ"):
        score_frame(np.zeros((10, 10), bool), _gt(_square()))


def _v(vid: str, j: float, f: float, tags: tuple[str, ...] = (), failed: bool = False):
    return ScoredVideo(vid, tags, VideoScore(j, f, frames=3), failed, "boom" if failed else None)


def test_dataset_means_weigh_every_video_the_same() -> None:
    summary = summarize([_v("a", 1.0, 0.5), _v("b", 0.5, 0.25)])
    assert (summary.count, summary.j, summary.f) == (2, 0.75, 0.375)
    assert summary.jf == pytest.approx(0.5625)
    empty = summarize([])
    assert (empty.count, empty.j, empty.f, empty.jf) == (0, None, None, None)


def test_breakdown_per_subset_and_the_revos_overall() -> None:
    videos = [
        _v("r1", 0.9, 0.8, ("referring",)),
        _v("r2", 0.7, 0.6, ("referring",)),
        _v("q1", 0.3, 0.2, ("reasoning",), failed=True),
        _v("n1", 0.0, 0.0, ("type-2",)),
    ]
    plain = breakdown(videos)
    assert plain.overall.count == 4
    assert plain.overall.j == pytest.approx((0.9 + 0.7 + 0.3) / 4)
    assert plain.tags["referring"].j == pytest.approx(0.8)
    assert plain.failed == [("q1", "boom")]
    # ReVOS: overall = mean of the referring and reasoning means (0.8 and 0.3), type 2 out.
    revos = breakdown(videos, overall_from=("referring", "reasoning"))
    assert revos.overall.count == 3
    assert revos.overall.j == pytest.approx((0.8 + 0.3) / 2)
    assert revos.overall.f == pytest.approx((0.7 + 0.2) / 2)
    assert revos.overall.failed == 1
    doc = revos.to_dict()
    assert doc["overall_from"] == ["referring", "reasoning"]
    assert set(doc["tags"]) == {"reasoning", "referring", "type-2"}
