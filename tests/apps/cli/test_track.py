"""``sam3-agent track``: the tiny random SAM 3 video model from disk, the test MLLM server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import cv2
import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from tests.support.clips import write_frames, write_mp4
from tests.support.openai_server import ScriptedServer
from tests.support.video_cli import square_picker, tiny_video_flags

runner = CliRunner()


@pytest.fixture
def mllm() -> Iterator[ScriptedServer]:
    with square_picker() as server:
        yield server


@pytest.fixture
def flags(tiny_sam3_video_dir: Path, mllm: ScriptedServer, hf_offline: None) -> list[str]:
    return tiny_video_flags(tiny_sam3_video_dir, mllm)


def test_track_writes_every_output(tmp_path: Path, flags: list[str]) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 8)
    out = tmp_path / "out"
    done = runner.invoke(
        app, ["track", str(clip), "the square that moves left", "--out", str(out), *flags]
    )
    assert done.exit_code == 0, done.output
    assert "tracking 8 of 8 frames" in done.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["video"]["frames_used"] == list(range(8))
    assert doc["status"] in ("masks", "no_mask")
    for track in doc["tracks"]:
        assert len(track["segmentations"]) == 8
    capture = cv2.VideoCapture(str(out / "overlay.mp4"))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 8
    capture.release()
    assert (out / "contact_sheet.png").is_file() and (out / "trace.jsonl").is_file()
    # The same command with --resume on the ended session answers without asking again,
    # and keeps the session's total time.
    again = runner.invoke(
        app, ["track", str(clip), "the square that moves left", "--resume", str(out), *flags]
    )
    assert again.exit_code == 0, again.output
    resumed = json.loads((out / "result.json").read_text())
    assert resumed["timings_s"]["total"] == doc["timings_s"]["total"]


def test_a_frame_folder_with_a_stride(tmp_path: Path, flags: list[str]) -> None:
    folder = write_frames(tmp_path / "frames", 9)
    out = tmp_path / "out"
    done = runner.invoke(
        app, ["track", str(folder), "the square", "--stride", "4", "--out", str(out), *flags]
    )
    assert done.exit_code == 0, done.output
    assert json.loads((out / "result.json").read_text())["video"]["frames_used"] == [0, 4, 8]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stride", "0"], "--stride must be >= 1"),
        (["--frames-shown", "40"], "--frames-shown must be between 1 and 16"),
        (["--start", "3", "--end", "1"], "--end (1.0) must be after --start (3.0)"),
        (["--video-cache-mb", "-5"], "video"),
    ],
)
def test_bad_flags_are_one_line_before_anything_loads(
    tmp_path: Path, args: list[str], message: str
) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 3)
    done = runner.invoke(app, ["track", str(clip), "q", "--sam3", str(tmp_path / "nope"), *args])
    assert done.exit_code == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_corrupt_video_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 100)
    done = runner.invoke(app, ["track", str(bad), "q", "--sam3", str(tmp_path / "nope")])
    assert done.exit_code == 2
    assert "cannot read video" in done.stderr and not (tmp_path / "runs").exists()
