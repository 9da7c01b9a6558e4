"""``sam3-agent batch`` with video rows: the tiny random SAM 3 (one checkpoint for the image
and the video model) from disk, the test MLLM server, the video flags as the rows' defaults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.jobs.store import reading
from tests.support.batch_fixtures import write_images
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
    return [*tiny_video_flags(tiny_sam3_video_dir, mllm), "--no-progress"]


def _summary(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def test_a_mixed_batch_runs_images_and_videos_and_resumes(
    tmp_path: Path, flags: list[str], mllm: ScriptedServer
) -> None:
    write_images(tmp_path / "in" / "img")
    (tmp_path / "in" / "clips").mkdir()
    write_mp4(tmp_path / "in" / "clips" / "clip.mp4", 8)
    write_frames(tmp_path / "in" / "clips" / "frames", 6)
    rows = [
        {"image": "img/one.png", "query": "the square"},
        {"video": "clips/clip.mp4", "query": "the square that moves left"},
        {"video": "clips/frames", "query": "the square", "stride": 1, "id": "frames"},
        {"video": "clips/gone.mp4", "query": "the square"},
    ]
    source = tmp_path / "in" / "requests.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["batch", str(source), "--out", str(out), "--stride", "2", "--frames-shown", "3"]
    done = runner.invoke(app, [*args, *flags])
    assert done.exit_code == 0, done.output
    assert "4 run, 0 already stored, 1 failed" in done.stderr

    image, clip, frames, gone = _summary(out)
    assert image["image"].endswith("one.png") and image["status"] in ("masks", "no_mask")
    assert clip["id"] == "clip.mp4[stride=2]:the square that moves left"  # the flag's stride
    assert (clip["frames"], frames["frames"]) == (4, 6)  # a row's own stride wins
    for row in (clip, frames):
        assert row["status"] in ("masks", "no_mask"), row
        files = out / row["outputs"]
        doc = json.loads((files / "result.json").read_text())
        assert doc["options"]["shown"]["frames_shown"] == 3
        for track in doc["tracks"]:
            assert len(track["segmentations"]) == row["frames"]
        capture = cv2.VideoCapture(str(files / "overlay.mp4"))
        assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == row["frames"]
        capture.release()
    assert gone["status"] == "failed" and "video not found" in gone["failure"]
    with reading(out, RequestResult.from_json) as store:
        assert store.config()["video"]["frames_shown"] == 3  # type: ignore[index]

    calls = len(mllm.completions)
    again = runner.invoke(app, [*args, *flags])
    assert again.exit_code == 0, again.output
    assert "0 run, 4 already stored" in again.stderr and len(mllm.completions) == calls
