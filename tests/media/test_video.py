"""Opening videos: files and frame folders, selections, damage, one-line errors."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from sam3_agent.media.video import FrameSelection, VideoLoadError, open_video
from sam3_agent.values.errors import UserError
from tests.support.clips import LEFT_AND_RIGHT, render_frame, write_frames, write_mp4


def test_a_file_streams_every_frame_in_order(tmp_path: Path) -> None:
    video = open_video(write_mp4(tmp_path / "clip.mp4", 12))
    assert (video.kind, video.frame_count, video.size, video.fps) == ("file", 12, (96, 128), 10.0)
    frames = list(video.frames())
    assert [f.index for f in frames] == list(range(12))
    assert [f.position for f in frames] == list(range(12))
    assert frames[3].time_s == pytest.approx(0.3)
    # Lossy codec: the decoded frame is close to what was written.
    expected = render_frame(LEFT_AND_RIGHT, 5, (96, 128)).astype(int)
    assert np.abs(frames[5].pixels.astype(int) - expected).mean() < 6


def test_a_folder_of_frames_is_a_video(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 7, suffix=".png")
    (folder / "notes.txt").write_text("not a frame")
    video = open_video(folder)
    assert (video.kind, video.frame_count, video.fps) == ("frames", 7, None)
    frames = list(video.frames([1, 4]))
    assert [f.index for f in frames] == [1, 4]
    assert np.array_equal(frames[1].pixels, render_frame(LEFT_AND_RIGHT, 4, (96, 128)))


@settings(max_examples=25, deadline=None)
@given(
    stride=st.integers(1, 5),
    max_frames=st.none() | st.integers(1, 12),
    start=st.none() | st.integers(0, 8),
)
def test_a_selection_picks_the_frames_it_names(
    tmp_path_factory: pytest.TempPathFactory, stride: int, max_frames: int | None, start: int | None
) -> None:
    folder = tmp_path_factory.getbasetemp() / "sel"
    if not folder.exists():
        write_frames(folder, 12)
    start_s = None if start is None else start / 4.0
    selection = FrameSelection(stride=stride, max_frames=max_frames, start_s=start_s, fps=4.0)
    video = open_video(folder, selection)
    expected = [i for i in range(0, 12, stride) if start_s is None or i / 4.0 >= start_s]
    assert list(video.indices) == expected[:max_frames]
    assert [f.index for f in video.frames()] == list(video.indices)


def test_a_truncated_file_opens_with_the_frames_before_the_damage(tmp_path: Path) -> None:
    whole = write_mp4(tmp_path / "whole.avi", 30, fourcc="MJPG").read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    video = open_video(cut)
    assert 0 < video.frame_count < 30
    assert video.note is not None and "declares 30 frames" in video.note
    assert len(list(video.frames())) == video.frame_count
    assert video.describe()["frames_used"] == list(range(video.frame_count))


def test_a_cut_mp4_that_lost_its_index_is_one_line(tmp_path: Path) -> None:
    whole = write_mp4(tmp_path / "whole.mp4", 30).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(VideoLoadError, match="cannot read video") as e:
        open_video(cut)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "content", [b"", b"not a video at all", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64]
)
def test_a_file_that_is_no_video_is_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.mp4"
    path.write_bytes(content)
    with pytest.raises(VideoLoadError) as e:
        open_video(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_missing_paths_urls_and_empty_folders_are_named(tmp_path: Path) -> None:
    with pytest.raises(VideoLoadError, match="video not found"):
        open_video(tmp_path / "nope.mp4")
    with pytest.raises(VideoLoadError, match=r"https://example.com/a.mp4 is a URL"):
        open_video("https://example.com/a.mp4")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VideoLoadError, match="no frame images"):
        open_video(tmp_path / "empty")


def test_bad_selections_are_refused_before_any_decoding(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="`stride`"):
        FrameSelection(stride=0)
    with pytest.raises(UserError, match="`end_s`"):
        FrameSelection(start_s=2, end_s=1)
    with pytest.raises(UserError, match="needs `fps`"):
        open_video(write_frames(tmp_path / "f", 3), FrameSelection(start_s=1.0))
    with pytest.raises(VideoLoadError, match="no frame"):
        open_video(write_mp4(tmp_path / "c.mp4", 5), FrameSelection(start_s=100.0))


def test_frames_over_the_pixel_limit_are_refused(tmp_path: Path) -> None:
    with pytest.raises(VideoLoadError, match="over the limit"):
        open_video(write_mp4(tmp_path / "c.mp4", 3), max_pixels=1000)


sizes = st.tuples(st.integers(4, 20), st.integers(4, 20))


@st.composite
def uneven_folders(draw: st.DrawFn) -> list[tuple[int, int]]:
    """``(height, width)`` per frame of a folder where at least one frame after the first
    has another size than the first."""
    first = draw(sizes)
    rest = draw(st.lists(st.sampled_from([first]) | sizes, min_size=1, max_size=5))
    odd = draw(st.integers(0, len(rest) - 1))
    if rest[odd] == first:
        rest[odd] = (first[0] + 1, first[1])
    return [first, *rest]


@settings(max_examples=30, deadline=None)
@given(frame_sizes=uneven_folders(), stride=st.integers(1, 3))
def test_a_folder_of_frames_of_different_sizes_is_refused(
    frame_sizes: list[tuple[int, int]], stride: int
) -> None:
    """Every frame is checked, used or not (a later selection may use it), and none is
    resized: the first frame of another size is named, with both sizes, in one line."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i, (h, w) in enumerate(frame_sizes):
            Image.new("RGB", (w, h), (40, 40, 40)).save(folder / f"{i:05d}.png")
        with pytest.raises(VideoLoadError) as caught:
            open_video(folder, FrameSelection(stride=stride))
    odd = next(i for i, size in enumerate(frame_sizes) if size != frame_sizes[0])
    (h0, w0), (h, w) = frame_sizes[0], frame_sizes[odd]
    message = str(caught.value)
    assert f"frame {odd:05d}.png is {w}x{h}, the first frame (00000.png) {w0}x{h0}" in message
    assert "\n" not in message


def test_a_frame_is_never_resized_to_the_videos_size(tmp_path: Path) -> None:
    """A frame that no longer has the size the video opened with (a file's stream that
    changes size; a folder edited since) is refused when decoded, not fitted."""
    video = replace(open_video(write_frames(tmp_path / "f", 3)), size=(48, 64))
    with pytest.raises(VideoLoadError, match="frame 0 is 128x96, the first frame used 64x48"):
        list(video.frames())


def test_the_digest_follows_content_and_selection(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "f", 6)
    a = open_video(folder).digest()
    assert a == open_video(folder).digest()
    assert a != open_video(folder, FrameSelection(stride=2)).digest()


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_a_rotated_file_is_decoded_as_displayed(tmp_path: Path, rotation: int) -> None:
    """The display matrix (as a phone writes it) turns the stored frames upright."""
    import av

    clip = write_mp4(tmp_path / "phone.mp4", 4, rotation=rotation)
    with av.open(str(clip)) as container:
        stored = next(container.decode(video=0))
        assert stored.rotation % 360 == rotation  # the matrix is in the file, as PyAV reads it
        assert (stored.height, stored.width) == ((96, 128) if rotation == 180 else (128, 96))
    video = open_video(clip)
    assert video.size == (96, 128)
    for frame in video.frames():
        expected = render_frame(LEFT_AND_RIGHT, frame.index, (96, 128)).astype(int)
        assert np.abs(frame.pixels.astype(int) - expected).mean() < 6


def test_a_variable_frame_rate_file_keeps_its_frame_times(tmp_path: Path) -> None:
    times = (0.0, 0.1, 0.5, 0.55, 1.5, 1.6)
    video = open_video(write_mp4(tmp_path / "vfr.mp4", times=times))
    assert [f.time_s for f in video.frames()] == pytest.approx(list(times))
    chosen = video.reselect(FrameSelection(start_s=0.4, end_s=1.5))
    assert chosen.indices == (2, 3, 4)  # by timestamps, not by index / mean frame rate
    assert [f.time_s for f in chosen.frames()] == pytest.approx([0.5, 0.55, 1.5])


def test_a_truncated_mp4_with_its_index_first_keeps_the_frames_before_the_damage(
    tmp_path: Path,
) -> None:
    from sam3_agent.media.video_writer import write_overlay_video
    from sam3_agent.values.tracks import Tracks

    source = open_video(write_mp4(tmp_path / "clip.mp4", 30))
    whole = write_overlay_video(source, Tracks(30, source.size), tmp_path / "overlay.mp4")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    video = open_video(cut)
    assert 0 < video.frame_count < 30 and video.note is not None
    assert len(list(video.frames())) == video.frame_count
