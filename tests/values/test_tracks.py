"""Tracks: built frame by frame, post-processed like detections, written as YouTube-VIS."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.values.tracks import TrackBuilder, Tracks, postprocess_tracks


def _square(size: tuple[int, int], x: int, y: int, side: int) -> np.ndarray:
    m = np.zeros(size, dtype=bool)
    m[y : y + side, x : x + side] = True
    return m


def _builder_with(tracks: dict[int, list[tuple[int, int, int] | None]], score: dict[int, float]):
    size = (40, 60)
    frames = max(len(v) for v in tracks.values())
    b = TrackBuilder(frames, size)
    for position in range(frames):
        ids, masks, scores = [], [], []
        for oid, boxes in tracks.items():
            box = boxes[position] if position < len(boxes) else None
            ids.append(oid)
            masks.append(np.zeros(size, bool) if box is None else _square(size, *box))
            scores.append(score[oid])
        b.add(position, ids, np.stack(masks), scores)
    return b.build()


def test_a_track_keeps_only_the_frames_its_object_is_in() -> None:
    tracks = _builder_with({7: [(1, 1, 5), None, (3, 1, 5)]}, {7: 0.9})
    (track,) = tracks
    assert track.positions == [0, 2] and track.extent == (0, 2)
    assert track.area(0) == 25 and track.area(1) == 0
    assert np.array_equal(track.mask(2), _square((40, 60), 3, 1, 5))
    assert track.boxes[2] == (3.0, 1.0, 8.0, 6.0)
    vis = tracks.youtube_vis()[0]
    assert vis["segmentations"][1] is None and vis["segmentations"][0]["size"] == [40, 60]


def test_postprocess_drops_low_scores_and_duplicates_through_time() -> None:
    tracks = _builder_with(
        {
            1: [(0, 0, 10), (2, 0, 10)],
            2: [(1, 0, 10), (3, 0, 10)],  # overlaps 1 by 90 % in both frames
            3: [(40, 20, 8), (41, 20, 8)],
            4: [(20, 20, 8), (20, 20, 8)],
        },
        {1: 0.8, 2: 0.9, 3: 0.7, 4: 0.2},
    )
    kept = postprocess_tracks(tracks, score_threshold=0.5, overlap_threshold=0.3)
    assert [t.track_id for t in kept] == [2, 3]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(1, 9)), min_size=1, max_size=6
    )
)
def test_json_round_trip_and_union(boxes: list[tuple[int, int, int]]) -> None:
    tracks = _builder_with(
        {i + 1: [b] for i, b in enumerate(boxes)}, {i + 1: 0.5 for i in range(len(boxes))}
    )
    again = Tracks.from_json(tracks.to_json())
    assert again == tracks
    union = tracks.union_mask(0)
    expected = np.zeros((40, 60), bool)
    for b in boxes:
        expected |= _square((40, 60), *b)
    assert np.array_equal(union, expected)


def test_mismatched_inputs_are_refused() -> None:
    b = TrackBuilder(2, (4, 4))
    with pytest.raises(ValueError):
        b.add(0, [1, 2], np.zeros((1, 4, 4), bool), [0.5, 0.5])
    with pytest.raises(ValueError):
        b.add(0, [1], np.zeros((1, 5, 4), bool), [0.5])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=4))
def test_tracks_select_and_checkpoint_form(indices: list[int]) -> None:
    from sam3_agent.agent.checkpoint.state import detections_from_json

    tracks = _builder_with(
        {1: [(0, 0, 5), (2, 2, 5)], 2: [None, (30, 10, 8)], 3: [(40, 20, 6), None]},
        {1: 0.9, 2: 0.8, 3: 0.7},
    )
    chosen = tracks.select(indices)
    assert [t.track_id for t in chosen] == [tracks[i].track_id for i in indices]
    assert detections_from_json(tracks.to_state(), tracks.size) == tracks
