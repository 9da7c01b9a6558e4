"""What the MLLM and the result see of a clip: sampled frames, sheets, track checks, the
overlay video and the contact sheet, checked on synthetic clips whose squares are known."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.media import video_writer
from sam3_agent.media.drawing import Placed, fill_mask, mask_color
from sam3_agent.media.video import Frame, FrameSelection, VideoLoadError, VideoSource, open_video
from sam3_agent.media.video_render import (
    contact_sheet,
    render_sheet,
    render_track_check,
    sample_positions,
    sheet_grid,
)
from sam3_agent.media.video_writer import write_overlay_video
from sam3_agent.values.tracks import Track, TrackBuilder, Tracks
from tests.support.clips import BACKGROUND, Square, render_frame, square_mask, write_frames

SIZE = (120, 160)
# Squares of 40 px: a number's label (centred) and the outline (on the edge) leave the pixel
# 5 px inside the top-left corner showing the fill alone.
BIG = (
    Square((230, 40, 40), (10, 10), (4, 0), side=40),  # red, moves right
    Square((40, 200, 60), (110, 70), (-4, 0), side=40),  # green, moves left
)
PROBE = 5
# Squares in colours far from the first two fills: a lossy codec still tells them apart.
CONTRAST = (
    Square((40, 60, 230), (10, 10), (4, 0), side=40),  # blue under red
    Square((230, 230, 230), (110, 70), (-4, 0), side=40),  # white under green
)


# -- fakes: a video that counts what it decodes ------------------------------------------------


@dataclass(frozen=True, eq=False)
class CountingVideo(VideoSource):
    """A :class:`VideoSource` that records every frame it decodes and how many decoded
    frames were alive at once (frames drawn in memory from ``squares`` when given, read
    from the source otherwise)."""

    squares: tuple[Square, ...] = ()
    decoded: list[int] = field(default_factory=list)
    peak: list[int] = field(default_factory=lambda: [0])
    fail_at: int | None = None

    @classmethod
    def of(cls, video: VideoSource, **extra: object) -> CountingVideo:
        values = {f.name: getattr(video, f.name) for f in fields(VideoSource)}
        return cls(**values, **extra)  # type: ignore[arg-type]

    def frames(self, positions: Iterator[int] | list[int] | None = None) -> Iterator[Frame]:
        source = self._synthetic(positions) if self.squares else super().frames(positions)
        alive: list[weakref.ref[np.ndarray]] = []
        for frame in source:
            if frame.position == self.fail_at:
                raise VideoLoadError(f"frame {frame.index} can no longer be read")
            self.decoded.append(frame.position)
            alive = [r for r in alive if r() is not None] + [weakref.ref(frame.pixels)]
            self.peak[0] = max(self.peak[0], len(alive))
            yield frame
            del frame  # only the caller may keep a frame alive

    def _synthetic(self, positions: Iterator[int] | list[int] | None) -> Iterator[Frame]:
        wanted = range(self.frame_count) if positions is None else sorted(set(positions))
        for p in wanted:
            index = self.indices[p]
            yield Frame(p, index, self.time_of(index), render_frame(self.squares, index, self.size))


def synthetic(
    frames: int, size: tuple[int, int] = SIZE, squares: tuple[Square, ...] = BIG
) -> CountingVideo:
    return CountingVideo(
        path=Path("synthetic"), kind="frames", indices=tuple(range(frames)), size=size,
        fps=10.0, source_frames=frames, max_pixels=10**9, squares=squares,
    )  # fmt: skip


def tracks_of(
    video: VideoSource, squares: tuple[Square, ...] = BIG, absent: dict[int, set[int]] | None = None
) -> Tracks:
    """The ground-truth track of each square (track ``k`` is square ``k``), leaving out the
    positions ``absent[k]``."""
    absent = absent or {}
    builder = TrackBuilder(video.frame_count, video.size)
    for position, index in enumerate(video.indices):
        ids = [k for k in range(len(squares)) if position not in absent.get(k, set())]
        masks = np.zeros((len(ids), *video.size), dtype=bool)
        for row, k in enumerate(ids):
            masks[row] = square_mask(squares[k], index, video.size)
        builder.add(position, ids, masks, [0.9 - 0.1 * k for k in ids])
    return builder.build()


def blend(rgb: tuple[int, int, int], color: tuple[int, int, int]) -> tuple[int, ...]:
    """``rgb`` under a mask filled with ``color`` (the renders' own fill)."""
    canvas = np.array([[rgb]], dtype=np.uint8)
    fill_mask(canvas, Placed(np.ones((1, 1), dtype=np.uint8), 0, 0), color)
    return tuple(int(v) for v in canvas[0, 0])


def pixel(image: np.ndarray, x: int, y: int) -> tuple[int, ...]:
    return tuple(int(v) for v in image[y, x])


@pytest.fixture
def png_clip(tmp_path: Path) -> VideoSource:
    """12 lossless frames (exact colours), 10 fps."""
    return open_video(
        write_frames(tmp_path / "frames", 12, squares=BIG, size=SIZE, suffix=".png"),
        FrameSelection(fps=10.0),
    )


# -- sample_positions ------------------------------------------------------------------------


def _tracks_at(frame_count: int, presence: list[set[int]]) -> Tracks:
    rle = {"size": [1, 1], "counts": "01"}
    tracks = tuple(Track(k, 0.9, {p: rle for p in ps}) for k, ps in enumerate(presence))
    return Tracks(frame_count, (1, 1), tracks)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), frame_count=st.integers(1, 300), count=st.integers(1, 12))
def test_sampled_positions_spread_over_the_frames_with_tracks(
    data: st.DataObject, frame_count: int, count: int
) -> None:
    position = st.integers(0, frame_count - 1)
    presence = data.draw(st.lists(st.sets(position, max_size=40), max_size=3))
    within = data.draw(
        st.none()
        | st.tuples(st.integers(-5, frame_count + 5), st.integers(-5, frame_count + 5))
        .map(lambda w: (min(w), max(w)))
        .filter(lambda w: w[1] >= 0 and w[0] <= frame_count - 1)
    )
    tracks = _tracks_at(frame_count, presence) if presence else None
    picked = sample_positions(tracks, frame_count, count, within=within)

    lo, hi = (
        (0, frame_count - 1)
        if within is None
        else (max(0, within[0]), min(frame_count - 1, within[1]))
    )
    present = sorted({p for ps in presence for p in ps if lo <= p <= hi})
    candidates = present or list(range(lo, hi + 1))
    assert picked == sorted(set(picked))
    assert set(picked) <= set(candidates)
    assert len(picked) == min(count, len(candidates))
    if count >= 2:
        assert picked[0] == candidates[0] and picked[-1] == candidates[-1]
    assert sample_positions(tracks, frame_count, count, within=within) == picked


def test_sampled_positions_examples() -> None:
    assert sample_positions(None, 100, 5) == [0, 25, 50, 74, 99]
    assert sample_positions(None, 3, 8) == [0, 1, 2]
    assert sample_positions(None, 9, 1) == [4]
    # Only where a candidate exists: two tracks, one early and one late.
    tracks = _tracks_at(100, [set(range(10, 20)), set(range(80, 90))])
    assert sample_positions(tracks, 100, 4) == [10, 16, 83, 89]
    # Narrowed after an Uncertain verdict; a range without tracks shows its own frames.
    assert sample_positions(tracks, 100, 3, within=(15, 85)) == [15, 80, 85]
    assert sample_positions(tracks, 100, 3, within=(30, 40)) == [30, 35, 40]
    assert sample_positions(_tracks_at(50, []), 50, 2) == [0, 49]


@pytest.mark.parametrize(
    ("frame_count", "count", "within"),
    [(0, 3, None), (10, 0, None), (10, 3, (5, 2)), (10, 3, (20, 30))],
)
def test_impossible_samples_are_refused(
    frame_count: int, count: int, within: tuple[int, int] | None
) -> None:
    with pytest.raises(ValueError):
        sample_positions(None, frame_count, count, within=within)


# -- the grid --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 9),
    height=st.integers(8, 3000),
    width=st.integers(8, 3000),
    max_side=st.integers(160, 2048),
)
def test_a_grid_fits_max_side_and_never_enlarges(
    count: int, height: int, width: int, max_side: int
) -> None:
    grid = sheet_grid(count, (height, width), max_side)
    assert max(grid.size) <= max_side
    assert grid.columns * grid.rows >= count > (grid.rows - 1) * grid.columns
    assert grid.cell[0] <= height and grid.cell[1] <= width
    # The cell keeps the frame's shape (to a pixel of rounding).
    assert abs(grid.cell[1] - width * grid.cell[0] / height) <= 1 + width / height
    sheet_h, sheet_w = grid.size
    for i in range(count):
        x, y = grid.frame_origin(i)
        assert y >= grid.caption and x + grid.cell[1] <= sheet_w and y + grid.cell[0] <= sheet_h


def test_four_landscape_frames_make_two_by_two() -> None:
    grid = sheet_grid(4, (480, 640), 1024)
    assert (grid.columns, grid.rows) == (2, 2)
    with pytest.raises(ValueError, match="too small"):
        sheet_grid(9, (480, 640), 40)


# -- render_sheet ----------------------------------------------------------------------------


def _cell_pixel(sheet: np.ndarray, origin: tuple[int, int], x: int, y: int) -> tuple[int, ...]:
    return pixel(sheet, origin[0] + x, origin[1] + y)


def test_sheet_cells_show_the_chosen_frames_in_order(png_clip: VideoSource) -> None:
    positions = [0, 5, 11]
    sheet = render_sheet(png_clip, positions, None, max_side=2000)
    grid = sheet_grid(3, SIZE, 2000)
    assert sheet.shape == (*grid.size, 3)
    assert grid.cell == SIZE  # shown at full size: pixels are the frame's own
    for i, frame in enumerate(positions):
        origin = grid.frame_origin(i)
        for square in BIG:
            x0, y0, x1, _ = square.box(frame)  # type: ignore[misc]
            # A square moves 4 px a frame: its edges pin the frame exactly.
            assert _cell_pixel(sheet, origin, x0, y0 + 20) == square.color
            assert _cell_pixel(sheet, origin, x1 - 1, y0 + 20) == square.color
            assert _cell_pixel(sheet, origin, x0 - 1, y0 + 20) == BACKGROUND
            assert _cell_pixel(sheet, origin, x1, y0 + 20) == BACKGROUND
        # Captioned above the frame: a dark strip with white text.
        x, y = origin
        strip = sheet[y - grid.caption : y, x : x + grid.cell[1]]
        assert (strip == 255).all(axis=2).any() and (strip == 20).all(axis=2).mean() > 0.5


def test_a_track_keeps_its_colour_in_every_cell_and_is_absent_where_it_is(
    png_clip: VideoSource,
) -> None:
    tracks = tracks_of(png_clip, absent={1: {5}})
    positions = [0, 5, 11]
    sheet = render_sheet(png_clip, positions, tracks, max_side=2000)
    grid = sheet_grid(3, SIZE, 2000)
    for i, frame in enumerate(positions):
        origin = grid.frame_origin(i)
        for k, square in enumerate(BIG):
            x0, y0, _, _ = square.box(frame)  # type: ignore[misc]
            shown = _cell_pixel(sheet, origin, x0 + PROBE, y0 + PROBE)
            if k == 1 and frame == 5:
                assert shown == square.color  # absent from the track: not drawn
            else:
                assert shown == blend(square.color, mask_color(k))


def test_numbers_choose_the_colours_shown(png_clip: VideoSource) -> None:
    tracks = tracks_of(png_clip)
    sheet = render_sheet(png_clip, [3], tracks, max_side=2000, numbers=[4, 9])
    origin = sheet_grid(1, SIZE, 2000).frame_origin(0)
    for square, number in zip(BIG, [4, 9], strict=True):
        x0, y0, _, _ = square.box(3)  # type: ignore[misc]
        assert _cell_pixel(sheet, origin, x0 + PROBE, y0 + PROBE) == blend(
            square.color, mask_color(number - 1)
        )
    for bad in ([1], [0, 2]):
        with pytest.raises(ValueError, match=r"numbers|start at 1"):
            render_sheet(png_clip, [3], tracks, max_side=512, numbers=bad)


def test_a_sheet_decodes_only_its_frames_one_at_a_time(png_clip: VideoSource) -> None:
    video = CountingVideo.of(png_clip)
    render_sheet(video, [9, 2, 6, 2], tracks_of(png_clip), max_side=600)
    assert video.decoded == [2, 6, 9]
    assert video.peak[0] <= 2


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(1, 9),
    height=st.integers(16, 400),
    width=st.integers(16, 400),
    max_side=st.integers(160, 900),
)
def test_sheets_and_checks_fit_max_side(count: int, height: int, width: int, max_side: int) -> None:
    side = max(2, min(height, width) // 3)
    squares = (Square((200, 30, 30), (width // 4, height // 4), (0, 0), side=side),)
    video = synthetic(12, (height, width), squares)
    tracks = tracks_of(video, squares, absent={0: {3}})
    positions = sample_positions(None, 12, count)
    sheet = render_sheet(video, positions, tracks, max_side=max_side)
    check = render_track_check(video, tracks[0], positions, max_side=max_side, number=1)
    for image in (sheet, check):
        assert image.dtype == np.uint8 and image.ndim == 3 and max(image.shape[:2]) <= max_side


def test_mismatched_tracks_are_refused(png_clip: VideoSource) -> None:
    other = tracks_of(synthetic(12, (60, 80)))
    with pytest.raises(ValueError, match="masks are"):
        render_sheet(png_clip, [0], other, max_side=512)
    with pytest.raises(ValueError, match="cover 5 frames"):
        render_sheet(png_clip, [0], Tracks(5, SIZE), max_side=512)
    with pytest.raises(ValueError, match="at least one"):
        render_sheet(png_clip, [], None, max_side=512)


# -- render_track_check ----------------------------------------------------------------------


def _count(image: np.ndarray, rgb: tuple[int, ...]) -> int:
    return int((image == np.array(rgb, dtype=np.uint8)).all(axis=2).sum())


def test_a_track_check_shows_that_track_alone_in_its_colour(png_clip: VideoSource) -> None:
    video = CountingVideo.of(png_clip)
    tracks = tracks_of(png_clip)
    check = render_track_check(video, tracks[1], [1, 6, 10], max_side=1200, number=3)
    assert video.decoded == [1, 6, 10] and video.peak[0] <= 2
    green, red = BIG[1].color, BIG[0].color
    # The checked track is filled in its number's colour (whole view and close-up) ...
    assert _count(check, blend(green, mask_color(2))) > 3 * 40 * 40
    # ... and the other is not drawn at all: its square keeps its own colour.
    assert _count(check, blend(red, mask_color(0))) == 0
    assert _count(check, red) > 3 * 30 * 30


def test_a_track_check_where_the_track_is_absent_shows_the_frame(png_clip: VideoSource) -> None:
    tracks = tracks_of(png_clip, absent={0: {2, 3}})
    check = render_track_check(png_clip, tracks[0], [2, 3], max_side=400, number=1)
    assert _count(check, blend(BIG[0].color, mask_color(0))) == 0
    assert _count(check, BIG[0].color) > 0
    with pytest.raises(ValueError, match="start at 1"):
        render_track_check(png_clip, tracks[0], [2], max_side=400, number=0)
    with pytest.raises(ValueError, match="at least one"):
        render_track_check(png_clip, tracks[0], [], max_side=400, number=1)


# -- write_overlay_video ---------------------------------------------------------------------


def _read_back(path: Path) -> tuple[list[np.ndarray], float]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        return frames, float(stream.average_rate or 0)


def test_the_overlay_video_has_every_frame_drawn(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 20, squares=CONTRAST, size=SIZE, suffix=".png")
    video = CountingVideo.of(open_video(folder, FrameSelection(fps=25.0)))
    tracks = tracks_of(video, CONTRAST)
    out = write_overlay_video(video, tracks, tmp_path / "out" / "overlay.mp4")
    assert out == tmp_path / "out" / "overlay.mp4"
    assert os.listdir(out.parent) == ["overlay.mp4"]  # no temporary file left
    frames, fps = _read_back(out)
    assert len(frames) == 20 and fps == pytest.approx(25.0)
    assert frames[0].shape == (*SIZE, 3)
    assert video.decoded == list(range(20)) and video.peak[0] <= 2
    for index in (0, 9, 19):
        for k, square in enumerate(CONTRAST):
            x0, y0, _, _ = square.box(index)  # type: ignore[misc]
            shown = np.array(pixel(frames[index], x0 + PROBE + 2, y0 + PROBE + 2))
            # Lossy codec: nearer the fill than the square's own colour.
            near = np.abs(shown - blend(square.color, mask_color(k))).max()
            assert near < 25 < np.abs(shown - square.color).max()


def test_the_overlay_video_shows_the_query_in_a_legend(tmp_path: Path) -> None:
    video = synthetic(3)
    plain, _ = _read_back(write_overlay_video(video, tracks_of(video), tmp_path / "a.mp4"))
    hostile = "\x1b[2J squares " + "x" * 10_000 + "\ud800\u202e"
    legend, _ = _read_back(
        write_overlay_video(video, tracks_of(video), tmp_path / "b.mp4", query=hostile)
    )
    # White legend text over the top-left corner, where the plain overlay has background.
    region = (slice(0, 18), slice(60, 120))
    assert (plain[0][region] > 200).all(axis=2).sum() == 0
    assert (legend[0][region] > 200).all(axis=2).sum() > 20


def test_the_overlay_video_plays_as_long_as_the_frames_used(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 21, squares=BIG, size=SIZE)
    strided = open_video(folder, FrameSelection(stride=3, fps=30.0))
    frames, fps = _read_back(write_overlay_video(strided, tracks_of(strided), tmp_path / "a.mp4"))
    assert len(frames) == 7 and fps == pytest.approx(10.0, rel=1e-3)
    # A folder without a frame rate plays at the default.
    plain = open_video(folder)
    frames, fps = _read_back(write_overlay_video(plain, Tracks(21, SIZE), tmp_path / "b.mp4"))
    assert len(frames) == 21 and fps == pytest.approx(video_writer.DEFAULT_FPS)


def test_an_odd_sized_video_is_padded_to_even(tmp_path: Path) -> None:
    size = (95, 127)
    squares = (Square((230, 40, 40), (10, 10), (3, 0), side=30),)
    folder = write_frames(tmp_path / "frames", 6, squares=squares, size=size, suffix=".png")
    video = open_video(folder)
    frames, _ = _read_back(
        write_overlay_video(video, tracks_of(video, squares), tmp_path / "o.mp4")
    )
    assert len(frames) == 6 and frames[0].shape == (96, 128, 3)


def test_a_failed_overlay_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    video = synthetic(10)
    path = tmp_path / "overlay.mp4"
    path.write_bytes(b"previous")
    broken = CountingVideo.of(video, squares=BIG, fail_at=4)
    with pytest.raises(VideoLoadError):
        write_overlay_video(broken, tracks_of(video), path)
    assert path.read_bytes() == b"previous" and os.listdir(tmp_path) == ["overlay.mp4"]
    # A fresh write replaces it.
    write_overlay_video(video, tracks_of(video), path, query="\x1b[31m" + "x" * 10_000 + "\ud800")
    assert len(_read_back(path)[0]) == 10 and os.listdir(tmp_path) == ["overlay.mp4"]


def test_no_codec_is_one_named_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_writer, "CODEC", "no-such-encoder")
    with pytest.raises(OSError, match="cannot write an MP4"):
        write_overlay_video(synthetic(3), Tracks(3, SIZE), tmp_path / "o.mp4")
    assert os.listdir(tmp_path) == []


def test_overlay_memory_is_flat_in_clip_length(tmp_path: Path) -> None:
    peaks = []
    for frames in (8, 40):
        video = synthetic(frames)
        write_overlay_video(video, tracks_of(video), tmp_path / f"{frames}.mp4")
        assert video.decoded == list(range(frames))
        peaks.append(video.peak[0])
    assert peaks[0] == peaks[1] <= 2


# -- the overlay's codec --------------------------------------------------------------------


@pytest.mark.parametrize(("size", "stored"), [(SIZE, (120, 160)), ((121, 161), (122, 162))])
def test_the_overlay_is_h264_yuv420p_with_its_index_first(
    tmp_path: Path, size: tuple[int, int], stored: tuple[int, int]
) -> None:
    """What browsers, QuickTime and phones play (the demo's page plays this very file)."""
    import av

    video = synthetic(9, size=size)
    overlay = write_overlay_video(video, tracks_of(video), tmp_path / "overlay.mp4")
    with av.open(str(overlay)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
    frames, fps = _read_back(overlay)
    assert len(frames) == 9 and frames[0].shape[:2] == stored  # odd sides padded to even
    assert fps == pytest.approx(10.0)
    data = overlay.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat")  # +faststart: plays while it loads
    assert os.listdir(tmp_path) == ["overlay.mp4"]


# -- contact_sheet ---------------------------------------------------------------------------


def test_a_contact_sheet_samples_where_the_tracks_are(png_clip: VideoSource) -> None:
    video = CountingVideo.of(png_clip)
    tracks = tracks_of(png_clip, absent={0: set(range(6)), 1: set(range(6))})
    sheet = contact_sheet(video, tracks, columns=2, count=4, cell_side=80)
    assert video.decoded == sample_positions(tracks, 12, 4) == [6, 8, 9, 11]
    assert video.peak[0] <= 2
    cell_h, cell_w = 60, 80  # 120x160 frames at most 80 px a side
    gap = sheet_grid(1, SIZE, 80).gap
    caption = sheet_grid(1, SIZE, 80).caption
    assert sheet.shape == (2 * (caption + cell_h) + gap, 2 * cell_w + gap, 3)


def test_a_contact_sheet_heads_itself_with_the_query(png_clip: VideoSource) -> None:
    tracks = tracks_of(png_clip)
    plain = contact_sheet(png_clip, tracks)
    assert plain.shape[1] <= 4 * 320 + 3 * 6  # 4 columns at most 320 px each
    hostile = "\x1b[2J" + "the red square " * 1000 + "\ud800\u202e"
    headed = contact_sheet(png_clip, tracks, query=hostile)
    assert headed.shape[1] == plain.shape[1] and headed.shape[0] > plain.shape[0]
    top = headed.shape[0] - plain.shape[0]
    assert np.array_equal(headed[top:], plain)
    # Fewer frames than asked for, fewer columns than given, no tracks at all.
    few = contact_sheet(png_clip, None, columns=8, count=3, cell_side=64)
    assert few.shape[1] == 3 * 64 + 2 * 6
