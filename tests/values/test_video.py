"""Opening videos: files and frame folders, selections, damage, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.values.errors import UserError
from sam3_agent.values.video import FrameSelection, VideoLoadError, open_video
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


def test_the_digest_follows_content_and_selection(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "f", 6)
    a = open_video(folder).digest()
    assert a == open_video(folder).digest()
    assert a != open_video(folder, FrameSelection(stride=2)).digest()
