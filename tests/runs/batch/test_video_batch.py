"""Video requests in ``run_batch``: beside image requests, in the same store and run directory,
each failing alone, resumable, with SAM 3's video model built only when a video arrives.

Fake backends (``video_batch.MixedModels``): the scripted MLLM and the fake segmenters, on
synthetic clips.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from sam3_agent.runs.batch.requests import load_requests
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.batch.run import run_batch
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.store import job_dir_name as request_dir
from sam3_agent.runs.jobs.store import reading
from sam3_agent.values.config import VideoOptions
from sam3_agent.values.errors import UserError
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from sam3_agent.values.rle import decode_rle
from tests.support.clips import square_mask
from tests.support.fakes import ScriptedChatModel
from tests.support.video_batch import CLIP_FRAMES, RED, MixedModels, write_mixed_jsonl

SIZE = (96, 128)


def _summary(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def _records(out: Path) -> dict[str, RequestResult]:
    with reading(out, RequestResult.from_json) as store:
        return {r.id: r for r in store.results()}


def test_a_mixed_file_runs_images_and_videos_into_one_run_directory(tmp_path: Path) -> None:
    source = write_mixed_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    models = MixedModels()
    done = run_batch(source, out, models, engine=EngineOptions(concurrency=3))
    assert (done.run.total, done.run.ran, done.run.failed) == (8, 8, 0)
    assert done.totals.by_status == {"masks": 5, "no_mask": 3, "failed": 0}
    assert sorted(models.built) == ["mllm", "sam3", "video"]  # each built once

    rows = _summary(out)
    assert [r.id for r in load_requests(source)] == [row["id"] for row in rows]
    images, videos = rows[:4], rows[4:]
    assert all("image" in row and "video" not in row and "frames" not in row for row in images)
    assert [row["id"] for row in videos] == [
        "clip.mp4:the square that moves left",
        "clip.mp4:the purple triangle",
        "frames[stride=2]:the square that moves left",
        "both",
    ]
    assert [(row["status"], row["masks"], row["frames"]) for row in videos] == [
        ("masks", 1, CLIP_FRAMES),
        ("no_mask", 0, CLIP_FRAMES),
        ("masks", 1, CLIP_FRAMES // 2),
        ("masks", 2, 4),
    ]
    assert videos[0]["video"] == str(tmp_path / "in" / "clips" / "clip.mp4")
    # The red square (16x16) is whole in every frame: its pixels summed over the frames.
    assert videos[0]["mask_pixels"] == 16 * 16 * CLIP_FRAMES

    files = out / videos[0]["outputs"]
    for name in ("result.json", "overlay.mp4", "contact_sheet.png", "trace.jsonl"):
        assert (files / name).is_file(), name
    assert not (files / "overlay.png").exists()
    doc = json.loads((files / "result.json").read_text())
    assert doc["query"] == "the square that moves left"
    (track,) = doc["tracks"]
    for index, rle in enumerate(track["segmentations"]):
        assert np.array_equal(decode_rle(rle), square_mask(RED, index, SIZE))
    strided = json.loads((out / videos[2]["outputs"] / "result.json").read_text())
    assert strided["video"]["frames_used"] == [0, 2, 4, 6]
    assert strided["options"]["selection"]["stride"] == 2  # the request's own frames
    overlay = cv2.VideoCapture(str(out / videos[3]["outputs"] / "overlay.mp4"))
    assert int(overlay.get(cv2.CAP_PROP_FRAME_COUNT)) == 4
    overlay.release()
    # An image request's files are those of `run`.
    assert (out / images[0]["outputs"] / "overlay.png").is_file()

    records = _records(out)
    assert {r.media for r in records.values()} == {"image", "video"}
    assert records["both"].media == "video" and records["both"].prediction is None
    assert records["both"].extra["scores"] == [0.9, 0.8]

    again = run_batch(source, out, MixedModels())
    assert (again.run.ran, again.run.skipped) == (0, 8)
    assert _summary(out) == rows


def test_a_missing_or_corrupt_video_fails_its_request_alone(tmp_path: Path) -> None:
    source = write_mixed_jsonl(tmp_path / "in")
    clips = tmp_path / "in" / "clips"
    (clips / "clip.mp4").write_bytes(b"not a video at all")
    shutil.rmtree(clips / "frames")
    out = tmp_path / "out"
    done = run_batch(source, out, MixedModels())
    assert (done.run.ran, done.run.failed) == (8, 4)
    assert done.totals.by_status["masks"] == 2  # the images' answers are untouched
    records = _records(out)
    failed = {i: r for i, r in records.items() if r.failed}
    assert {r.media for r in failed.values()} == {"video"} and len(failed) == 4
    assert all(r.infra_error and r.artifacts is None for r in failed.values())
    corrupt = failed["clip.mp4:the square that moves left"].failure
    assert corrupt is not None and "\n" not in corrupt
    assert corrupt.startswith("VideoLoadError: cannot read video") and "clip.mp4" in corrupt
    missing = failed["frames[stride=2]:the square that moves left"].failure
    assert missing == f"VideoLoadError: video not found: {clips / 'frames'}"
    assert not any((out / request_dir(i)).exists() for i in failed)  # nothing was started

    # Fixed, the failures run again on demand, and only they do.
    fixed = write_mixed_jsonl(tmp_path / "in")
    assert fixed == source
    plain = run_batch(source, out, MixedModels())
    assert (plain.run.ran, plain.run.skipped) == (0, 8)
    retried = run_batch(source, out, MixedModels(), retry_failed=True)
    assert (retried.run.ran, retried.run.failed) == (4, 0)
    assert retried.totals.by_status == {"masks": 5, "no_mask": 3, "failed": 0}


@pytest.mark.parametrize(
    ("keep", "built"),
    [
        ("image", ["mllm", "sam3"]),  # no video: SAM 3's video model never loads
        ("video", ["mllm", "video"]),  # only videos: no image model either
    ],
)
def test_each_model_is_built_only_for_the_requests_that_need_it(
    tmp_path: Path, keep: str, built: list[str]
) -> None:
    requests = [r for r in load_requests(write_mixed_jsonl(tmp_path / "in")) if r.media == keep]
    models = MixedModels()
    done = run_batch(requests, tmp_path / "out", models, engine=EngineOptions(concurrency=4))
    assert done.run.failed == 0
    assert sorted(models.built) == built


def test_a_video_model_that_cannot_load_fails_the_videos_only_once_built(tmp_path: Path) -> None:
    source = write_mixed_jsonl(tmp_path / "in")
    models = MixedModels(video_error="no SAM 3 video weights here")
    done = run_batch(source, tmp_path / "out", models, engine=EngineOptions(concurrency=4))
    assert done.totals.by_status == {"masks": 2, "no_mask": 2, "failed": 4}
    assert models.built.count("video") == 1  # tried once, not once per request
    failures = {r.failure for r in _records(tmp_path / "out").values() if r.failed}
    assert failures == {"SegmenterError: no SAM 3 video weights here"}


class Interrupted(ScriptedChatModel):
    """The batch's MLLM, pressing Ctrl-C when a session of ``query`` asks for its 2nd round."""

    def __init__(self, inner: ScriptedChatModel, query: str) -> None:
        super().__init__(replies=inner.replies)
        self.query = query

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        rounds = sum(m.role == "assistant" for m in messages)
        if self.query in messages[1].joined_text and rounds == 1:
            raise KeyboardInterrupt
        return await super().complete(messages, tools=tools)


@dataclass(frozen=True)
class InterruptingModels(MixedModels):
    query: str = ""

    def build_chat_model(self) -> ScriptedChatModel:
        return Interrupted(super().build_chat_model(), self.query)


def test_an_interrupted_batch_resumes_where_it_stopped(tmp_path: Path) -> None:
    source = write_mixed_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    # One at a time, in the engine's order (by path, then id): "both" (stored), then the
    # purple triangle's session, stopped after its first round, then the rest.
    order = sorted(load_requests(source), key=lambda r: (str(r.image_path), r.id))
    assert [r.id for r in order[:2]] == ["both", "clip.mp4:the purple triangle"]
    models = InterruptingModels(query="the purple triangle")
    with pytest.raises(KeyboardInterrupt):
        run_batch(source, out, models, engine=EngineOptions(concurrency=1))
    assert list(_records(out)) == ["both"]
    partial = out / request_dir("clip.mp4:the purple triangle")
    assert partial.is_dir()  # the interrupted session's checkpoint and trace

    resumed = run_batch(source, out, MixedModels(), engine=EngineOptions(concurrency=1))
    assert (resumed.run.skipped, resumed.run.ran, resumed.run.failed) == (1, 7, 0)
    assert resumed.totals.by_status == {"masks": 5, "no_mask": 3, "failed": 0}
    row = next(r for r in _summary(out) if r["id"] == "clip.mp4:the purple triangle")
    assert row["status"] == "no_mask" and row["rounds"] == 2
    doc = json.loads((out / row["outputs"] / "result.json").read_text())
    assert doc["status"] == "no_mask" and doc["query"] == "the purple triangle"


def test_video_options_name_the_run_only_when_changed(tmp_path: Path) -> None:
    requests = [r for r in load_requests(write_mixed_jsonl(tmp_path / "in")) if r.media == "video"]
    out = tmp_path / "out"
    run_batch(requests[:1], out, MixedModels())
    with reading(out, RequestResult.from_json) as store:
        config = store.config()
    assert config is not None and "video" not in config  # as before videos existed
    run_batch(requests[:1], out, MixedModels(), video_options=VideoOptions())  # resumes
    with pytest.raises(UserError, match="different settings"):
        run_batch(requests[:1], out, MixedModels(), video_options=VideoOptions(frames_shown=3))
    other = tmp_path / "other"
    run_batch(requests[:1], other, MixedModels(), video_options=VideoOptions(frames_shown=3))
    with reading(other, RequestResult.from_json) as store:
        config = store.config()
    assert config is not None and config["video"]["frames_shown"] == 3
