"""``sam3-agent track``: the tiny random SAM 3 video model from disk, the test MLLM server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import cv2
import pytest
from typer.testing import CliRunner

from sam3_agent.agent import rundir
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec, ModelPlan
from tests.support.clips import LEFT_AND_RIGHT, write_frames, write_mp4
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool
from tests.support.openai_server import ScriptedServer
from tests.support.resume import CtrlCAt
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


def test_a_run_directory_is_reused_with_overwrite(tmp_path: Path, flags: list[str]) -> None:
    """``--overwrite`` on a directory an earlier ``track`` wrote: every file there is one a
    run writes (:data:`rundir.ENTRIES`), so they are replaced rather than refused."""
    clip = write_mp4(tmp_path / "clip.mp4", 4)
    out = tmp_path / "out"
    first = runner.invoke(app, ["track", str(clip), "the square", "--out", str(out), *flags])
    assert first.exit_code == 0, first.output
    written = {p.name for p in out.iterdir()}
    assert {rundir.OVERLAY_VIDEO, rundir.CONTACT_SHEET, rundir.STATE} <= written <= rundir.ENTRIES
    again = runner.invoke(
        app, ["track", str(clip), "the square", "--out", str(out), "--overwrite", *flags]
    )
    assert again.exit_code == 0, again.output
    assert json.loads((out / rundir.RESULT).read_text())["video"]["frames_used"] == [0, 1, 2, 3]


def test_a_frame_folder_with_a_stride(tmp_path: Path, flags: list[str]) -> None:
    folder = write_frames(tmp_path / "frames", 9)
    out = tmp_path / "out"
    done = runner.invoke(
        app, ["track", str(folder), "the square", "--stride", "4", "--out", str(out), *flags]
    )
    assert done.exit_code == 0, done.output
    assert json.loads((out / "result.json").read_text())["video"]["frames_used"] == [0, 4, 8]


def test_a_frame_folder_of_two_sizes_is_one_line_before_any_model_loads(
    tmp_path: Path, flags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_frames(tmp_path / "frames", 4)
    write_frames(tmp_path / "odd", 3, size=(64, 80))
    (tmp_path / "odd" / "00002.jpg").replace(folder / "00002.jpg")
    monkeypatch.chdir(tmp_path)  # where the default run directory would be claimed
    built: list[str] = []
    for name in ("build_video_segmenter", "build_chat_model"):
        monkeypatch.setattr(BackendSpec, name, lambda self, name=name: built.append(name))
    done = runner.invoke(app, ["track", str(folder), "the square", *flags])
    assert done.exit_code == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "frame 00002.jpg is 80x64, the first frame (00000.jpg) 128x96" in done.stderr
    assert built == [] and not (tmp_path / "runs").exists()


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


def test_ctrl_c_says_how_to_continue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = CtrlCAt(ScriptedChatModel(replies=[tool("segment_phrase", text_prompt="square")] * 2), 2)
    monkeypatch.setattr(BackendSpec, "plan", lambda self, **kwargs: ModelPlan(self))
    monkeypatch.setattr(
        BackendSpec,
        "build_video_segmenter",
        lambda self: FakeVideoSegmenter({"square": LEFT_AND_RIGHT}),
    )
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: chat)
    clip = write_mp4(tmp_path / "clip.mp4", 4)
    out = tmp_path / "out"
    args = ["track", str(clip), "q", "--out", str(out), "--sam3-url", "http://127.0.0.1:9"]
    args += ["--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"]
    done = runner.invoke(app, args)
    assert done.exit_code == 130, done.output
    assert done.stderr.strip().splitlines()[-1] == (
        f"interrupted: the finished rounds are kept in {out}; continue with the same command "
        f"and --resume {out}"
    )
    again = runner.invoke(app, args)  # the same command, without --resume
    assert again.exit_code == 2
    assert f"holds an interrupted session; continue it with --resume {out}" in again.stderr


@pytest.mark.parametrize("command", ["run", "track"])
def test_help_lists_exit_code_130(command: str) -> None:
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "130 interrupted (--resume DIR continues the session)" in " ".join(shown.stdout.split())


def test_track_fetches_a_video_url_once_and_records_it(tmp_path: Path, flags: list[str]) -> None:
    import hashlib

    from tests.support.media_server import Route, media_server

    data = write_mp4(tmp_path / "clip.mp4", 6).read_bytes()
    out = tmp_path / "out"
    with media_server() as server:
        server.routes["/v/clip.mp4"] = Route(data)
        url = server.url("/v/clip.mp4")
        done = runner.invoke(app, ["track", url, "the square", "--out", str(out), *flags])
        assert server.hits("/v/clip.mp4") == 1
    assert done.exit_code == 0, done.output
    video = json.loads((out / "result.json").read_text())["video"]
    assert video["url"] == url == video["path"]
    assert video["sha256"] == hashlib.sha256(data).hexdigest()
    assert video["frames_used"] == list(range(6))


def test_a_video_url_serving_an_image_is_one_line(tmp_path: Path) -> None:
    from tests.support.media_server import Route, media_server

    with media_server() as server:
        server.routes["/clip.mp4"] = Route(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
        url = server.url("/clip.mp4")
        done = runner.invoke(app, ["track", url, "the square", "--out", str(tmp_path / "o")])
    assert done.exit_code == 2, done.output
    assert f"{url}: the bytes fetched are not a video" in done.stderr
    assert not (tmp_path / "o").exists()
