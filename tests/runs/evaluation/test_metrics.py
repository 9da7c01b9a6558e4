"""Metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.runs.evaluation.metrics import (
    SampleScore,
    ScoredSample,
    breakdown,
    score_mask,
    summarize,
)
from sam3_agent.runs.evaluation.results import RunningMetrics
from tests.support.fakes import square_mask


def _s(
    sid: str,
    i: int,
    u: int,
    pred: int | None = None,
    *,
    split: str = "val",
    tags: tuple[str, ...] = (),
    no_target: bool = False,
    failed: bool = False,
) -> ScoredSample:
    return ScoredSample(
        id=sid,
        split=split,
        tags=tags,
        no_target=no_target,
        score=SampleScore(i, u, pred if pred is not None else i, u - (pred or i) + i),
        failed=failed,
        failure="ChatModelError: down" if failed else None,
    )


@pytest.mark.parametrize(
    ("pred", "gt", "ignore", "expected"),
    [
        # 10x10 prediction inside a 20x20 target: I 100, U 400.
        (square_mask(30, 30, 0, 0, 10), square_mask(30, 30, 0, 0, 20), None, (100, 400, 100, 400)),
        # Both empty: U 0 and IoU 1.0.
        (np.zeros((5, 5), bool), np.zeros((5, 5), bool), None, (0, 0, 0, 0)),
        # Prediction on a no-target sample: I 0, U = the predicted area.
        (square_mask(20, 20, 0, 0, 5), np.zeros((20, 20), bool), None, (0, 25, 25, 0)),
        # Missed target: U = target area.
        (np.zeros((20, 20), bool), square_mask(20, 20, 0, 0, 4), None, (0, 16, 0, 16)),
        # Ignore pixels (rows/cols 0..4) leave I and U: pred 10x10 -> 75 valid; target 20x20
        # -> 375 valid; pred_area still counts all 100 predicted pixels.
        (
            square_mask(30, 30, 0, 0, 10),
            square_mask(30, 30, 0, 0, 20),
            square_mask(30, 30, 0, 0, 5),
            (75, 375, 100, 375),
        ),
        # A prediction only inside the ignore region is scored as empty vs empty.
        (
            square_mask(10, 10, 0, 0, 3),
            np.zeros((10, 10), bool),
            square_mask(10, 10, 0, 0, 5),
            (0, 0, 9, 0),
        ),
    ],
)
def test_score_mask(
    pred: np.ndarray, gt: np.ndarray, ignore: np.ndarray | None, expected: tuple[int, ...]
) -> None:
    score = score_mask(pred, gt, ignore)
    assert (score.intersection, score.union, score.pred_area, score.gt_area) == expected


def test_iou_of_empty_vs_empty_is_one_and_partial_is_ratio() -> None:
    assert SampleScore(0, 0, 0, 0).iou == 1.0
    assert SampleScore(100, 400, 100, 400).iou == 0.25
    assert SampleScore(0, 25, 25, 0).iou == 0.0


def test_score_mask_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        score_mask(np.zeros((4, 4), bool), np.zeros((4, 5), bool))


def test_summary_values() -> None:
    samples = [
        _s("a", 75, 375),  # 0.2
        _s("b", 400, 400),  # 1.0
        _s("c", 0, 100, 0),  # 0.0
        _s("d", 0, 100, 0, failed=True),  # 0.0, failed
    ]
    s = summarize(samples)
    assert s.count == 4
    assert s.giou == pytest.approx(0.3)
    assert s.ciou == pytest.approx(475 / 975)
    assert s.precision == {0.5: 0.25, 0.6: 0.25, 0.7: 0.25, 0.8: 0.25, 0.9: 0.25}
    assert s.failed == 1
    assert s.n_acc is None
    assert s.t_acc == 0.5  # a and b answered with a mask, c and d without
    assert (s.intersection, s.union) == (475, 975)


def test_precision_counts_iou_at_or_above_the_threshold() -> None:
    # ReLA and LAVT count iou >= t: an IoU of exactly 0.5 is a hit at Pr@0.5.
    s = summarize([_s("a", 1, 2), _s("b", 3, 5), _s("c", 9, 10)])  # 0.5, 0.6, 0.9
    assert s.precision == pytest.approx({0.5: 1.0, 0.6: 2 / 3, 0.7: 1 / 3, 0.8: 1 / 3, 0.9: 1 / 3})


def test_precision_leaves_out_no_target_samples() -> None:
    # gRefCOCO as ReLA scores it: one target missed, two no-target samples rightly answered
    # with no mask (IoU 1.0 each). Counting those as hits would give Pr@t = 2/3.
    samples = [
        _s("t", 0, 100, 0),
        _s("n1", 0, 0, 0, no_target=True),
        _s("n2", 0, 0, 0, no_target=True),
    ]
    s = summarize(samples)
    assert s.precision == {0.5: 0.0, 0.6: 0.0, 0.7: 0.0, 0.8: 0.0, 0.9: 0.0}
    assert s.n_acc == 1.0 and s.giou == pytest.approx(2 / 3)  # the others still count them


def test_a_no_target_group_has_no_precision() -> None:
    samples = [
        _s("n1", 0, 0, 0, tags=("no-target",), no_target=True),
        ScoredSample("n2", "val", ("no-target",), True, SampleScore(0, 100, 100, 0)),
        _s("t", 40, 50, tags=("target",)),
    ]
    b = breakdown(samples)
    assert b.tags["no-target"].precision is None
    assert b.tags["no-target"].to_dict()["precision"] is None
    assert b.tags["target"].precision == pytest.approx({0.5: 1, 0.6: 1, 0.7: 1, 0.8: 1, 0.9: 0})
    assert b.overall.precision == b.tags["target"].precision
    assert summarize([]).precision is None


_scores = st.tuples(st.integers(0, 50), st.integers(0, 50), st.booleans()).map(
    lambda t: (t[0], t[0] + t[1], t[2])
)


@given(st.lists(_scores, max_size=30))
@settings(max_examples=100, deadline=None)
def test_precision_is_the_share_of_target_samples_at_or_above(
    items: list[tuple[int, int, bool]],
) -> None:
    samples = [
        ScoredSample(f"s{k}", "val", (), no_target, SampleScore(i, u, i, 0 if no_target else u))
        for k, (i, u, no_target) in enumerate(items)
    ]
    target_ious = [s.iou for s in samples if not s.no_target]
    precision = summarize(samples).precision
    if not target_ious:
        assert precision is None
        return
    assert precision is not None
    for t, share in precision.items():
        assert share == sum(iou >= t for iou in target_ious) / len(target_ious)
    shares = [precision[t] for t in sorted(precision)]
    assert shares == sorted(shares, reverse=True)
    # Adding no-target samples, answered or not, never changes Pr@.
    extra = [ScoredSample("x", "val", (), True, SampleScore(0, 0, 0, 0))]
    assert summarize(samples + extra).precision == precision


def test_no_target_accuracy_and_union() -> None:
    samples = [
        _s("t1", 200, 200),  # target found
        _s("n1", 0, 0, 0, no_target=True),  # correctly empty: IoU 1
        ScoredSample("n2", "val", (), True, SampleScore(0, 100, 100, 0)),  # mask on no-target
        _s("t2", 0, 100, 0),  # target missed
    ]
    s = summarize(samples)
    assert s.giou == pytest.approx(0.5)
    assert s.ciou == pytest.approx(200 / 400)  # the wrong mask's 100 px count in sum U
    assert s.n_acc == 0.5
    assert s.t_acc == 0.5
    assert s.no_target == 2


def test_all_empty_group_has_no_ciou() -> None:
    s = summarize([_s("n", 0, 0, 0, no_target=True)])
    assert s.giou == 1.0
    assert s.ciou is None
    assert s.n_acc == 1.0


def test_empty_set() -> None:
    s = summarize([])
    assert (s.count, s.giou, s.ciou) == (0, None, None)


def test_breakdown_per_split_and_tag() -> None:
    samples = [
        _s("val/a", 75, 375, tags=("short",)),
        _s("val/b", 400, 400, tags=("long",)),
        _s("val/c", 0, 100, 0, tags=("short",)),
        _s("val/d", 0, 100, 0, tags=("long",), failed=True),
        _s("test/e", 10, 10, split="test", tags=("long",)),
    ]
    b = breakdown(samples)
    assert b.overall.count == 5
    assert list(b.splits) == ["test", "val"]
    assert b.splits["val"].giou == pytest.approx(0.3)
    assert b.split_tags["val"]["short"].giou == pytest.approx(0.1)
    assert b.split_tags["val"]["short"].ciou == pytest.approx(75 / 475)
    assert b.split_tags["val"]["long"].giou == pytest.approx(0.5)
    assert b.split_tags["val"]["long"].ciou == pytest.approx(400 / 500)
    assert b.tags["long"].count == 3
    assert b.failed == [("val/d", "ChatModelError: down")]
    doc = b.to_dict()
    assert doc["splits"]["val"]["tags"]["short"]["gIoU"] == pytest.approx(0.1)
    assert doc["overall"]["precision"]["Pr@0.5"] == pytest.approx(2 / 5)


def test_order_does_not_change_metrics() -> None:
    rng = np.random.default_rng(0)
    samples = [
        _s(f"s{i}", int(i_), int(i_ + d)) for i, (i_, d) in enumerate(rng.integers(0, 50, (40, 2)))
    ]
    forward = breakdown(samples).to_dict()
    backward = breakdown(list(reversed(samples))).to_dict()
    assert forward == backward


def test_running_metrics_match_summary() -> None:
    samples = [_s("a", 75, 375), _s("b", 400, 400), _s("c", 0, 100, 0, failed=True)]
    running = RunningMetrics()
    for s in samples:
        running.add(s)
    summary = summarize(samples)
    assert running.giou == pytest.approx(summary.giou)
    assert running.ciou == pytest.approx(summary.ciou)
    assert running.failed == 1
