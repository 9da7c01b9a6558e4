"""VideoDemoRunner without a web server: the upload checked, the model loaded once and lazily,
rounds streamed, the overlay as WebM, stop (also while the model loads), errors as one line."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path

import av
import numpy as np
import pytest

from sam3_agent.agent.loop import STOPPED
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.demo.sessions import LOADING, VideoDemoRunner, VideoUpdate, check_upload
from sam3_agent.apps.demo.views import video_summary
from sam3_agent.media.video import VideoLoadError
from sam3_agent.values.errors import SegmenterError, UserError
from tests.support.clips import square_mask
from tests.support.video_demo import FRAMES, QUERY, RED, HeldChat, VideoAgentBuilds, upload

SIZE = (96, 128)


async def collect(stream: object) -> list[VideoUpdate]:
    return [u async for u in stream]  # type: ignore[attr-defined]


def make(tmp_path: Path, builds: VideoAgentBuilds, **limits: float) -> VideoDemoRunner:
    return VideoDemoRunner(builds, tmp_path / "runs", VideoLimits(**limits))  # type: ignore[arg-type]


async def test_rounds_stream_then_the_overlay_plays_and_the_files_download(tmp_path: Path):
    builds = VideoAgentBuilds()
    demo = make(tmp_path, builds)
    clip = upload(tmp_path)
    updates = await collect(demo.run("tab-1", clip, QUERY))

    assert [u.state for u in updates] == ["running", "running", "running", "done"]
    assert updates[0].message == LOADING and updates[0].rounds == ()  # it started
    assert updates[0].output_dir == updates[-1].output_dir
    assert [len(u.rounds) for u in updates[1:]] == [1, 2, 2]
    assert updates[1].rounds[0].tool == "segment_phrase"
    done = updates[-1]
    assert done.result is not None and done.result.status == "masks"
    assert done.output_dir is not None and done.output_dir.parent == tmp_path / "runs"
    assert [f.name for f in done.files] == ["result.json", "overlay.mp4", "contact_sheet.png"]
    assert done.web_video == done.output_dir / "overlay.mp4"  # H.264: the page plays it
    with av.open(str(done.web_video)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and stream.frames == FRAMES
    document = json.loads(done.files[0].read_text())
    assert document["video"]["path"] == "clip.mp4"  # as uploaded, not the server's copy
    assert str(tmp_path) not in json.dumps(document)
    for index, rle in enumerate(document["tracks"][0]["segmentations"]):
        assert rle is not None and index < FRAMES
    assert np.array_equal(done.result.tracks[0].mask(3), square_mask(RED, 3, SIZE))
    assert video_summary(done.result).startswith("1 track(s) (scores 1: 0.90) over 12 frames")

    # The model loaded once: the next request does not wait for it again.
    again = await collect(demo.run("tab-2", clip, QUERY, stride=3))
    assert builds.count == 1 and again[0].message == "asking the model..."
    result = again[-1].result
    assert result is not None and result.video["frames_used"] == [0, 3, 6, 9]
    assert result.options is not None and result.options["selection"]["stride"] == 3


@pytest.mark.parametrize(
    ("limits", "stride", "message"),
    [
        ({"max_mb": 0.001}, 1, r"^clip\.mp4 is 0\.\d MB, over this demo's limit of 0\.001 MB$"),
        (
            {"max_frames": 5},
            1,
            r"^clip\.mp4: 12 frames to track, over this demo's limit of 5: set the frame "
            r"stride to 3 or more",
        ),
        ({"max_frames": 5}, 2, r"^clip\.mp4: 6 frames to track, .* stride to 3 or more"),
        ({"max_pixels": 1000}, 1, r"^video clip\.mp4 has 128x96 frames, over the limit of 1000"),
    ],
)
async def test_an_upload_over_a_limit_is_refused_before_any_model_work(
    tmp_path: Path, limits: dict[str, float], stride: int, message: str
):
    builds = VideoAgentBuilds()
    clip = upload(tmp_path)
    (update,) = await collect(make(tmp_path, builds, **limits).run("t", clip, QUERY, stride))
    assert update.state == "error" and update.output_dir is None  # refused before it started
    assert re.search(message, update.message), update.message
    assert str(clip.parent) not in update.message and "\n" not in update.message
    assert builds.count == 0 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("content", "query", "stride", "message"),
    [
        (None, QUERY, 1, "upload a video first"),
        (b"not a video", QUERY, 1, "cannot read video broken.mp4: not a video file"),
        (b"", QUERY, 1, "cannot read video broken.mp4"),
        ("clip", "  ", 1, "the query is empty"),
        ("clip", QUERY, 0, "the frame stride must be a whole number >= 1, got 0"),
        ("clip", QUERY, 1.5, "the frame stride must be a whole number >= 1, got 1.5"),
        ("clip", QUERY, float("nan"), "the frame stride must be a whole number"),
    ],
)
async def test_bad_requests_are_one_line_messages(
    tmp_path: Path, content: bytes | str | None, query: str, stride: float, message: str
):
    builds = VideoAgentBuilds()
    path: Path | None = None
    if content == "clip":
        path = upload(tmp_path)
    elif isinstance(content, bytes):
        path = upload(tmp_path).with_name("broken.mp4")
        path.write_bytes(content)
    (update,) = await collect(make(tmp_path, builds).run("t", path, query, stride))
    assert update.state == "error" and message in update.message
    assert str(tmp_path) not in update.message and "\n" not in update.message
    assert builds.count == 0


def test_check_upload_names_the_upload_and_says_what_it_will_track(tmp_path: Path) -> None:
    video = check_upload(upload(tmp_path, "My holiday.mp4"), 2, VideoLimits())
    assert video.frame_count == 6 and video.describe()["path"] == "My holiday.mp4"
    assert video.path.parent.name == "5f0c1d2e"  # read from the server's copy
    with pytest.raises(UserError):
        VideoLimits(max_frames=0)
    with pytest.raises(VideoLoadError, match=r"cannot read the upload gone\.mp4"):
        check_upload(tmp_path / "gone.mp4", 1, VideoLimits())


async def test_stop_ends_the_session_and_the_agent_writes_what_it_had(tmp_path: Path):
    chat = HeldChat(hold=1)  # the model never answers round 2
    demo = make(tmp_path, VideoAgentBuilds(chat))
    assert demo.stop("tab-1") is False
    stream = demo.run("tab-1", upload(tmp_path), QUERY)
    first = await stream.__anext__()
    assert first.message == LOADING
    second = await stream.__anext__()
    assert second.rounds[0].tool == "segment_phrase"
    await chat.waiting.wait()
    assert demo.active == 1 and demo.stop("tab-1") is True
    (stopped,) = await collect(stream)
    assert stopped.state == "stopped" and stopped.web_video is None
    assert [f.name for f in stopped.files] == ["result.json", "overlay.mp4", "contact_sheet.png"]
    document = json.loads(stopped.files[0].read_text())
    assert document["status"] == "failed" and document["failure"] == STOPPED
    assert demo.active == 0


async def test_a_closed_page_stops_its_session(tmp_path: Path):
    chat = HeldChat(hold=1)
    demo = make(tmp_path, VideoAgentBuilds(chat))
    stream = demo.run("tab-1", upload(tmp_path), QUERY)
    await stream.__anext__()
    second = await stream.__anext__()
    await chat.waiting.wait()
    await stream.aclose()  # what the web framework does when the page goes away
    assert demo.active == 0
    assert second.output_dir is not None
    document = json.loads((second.output_dir / "result.json").read_text())
    assert document["failure"] == STOPPED


async def test_stop_while_the_model_loads_and_the_next_request_uses_it(tmp_path: Path):
    builds = VideoAgentBuilds()
    builds.gate = threading.Event()
    demo = make(tmp_path, builds)
    clip = upload(tmp_path)
    stream = demo.run("tab-1", clip, QUERY)
    assert (await stream.__anext__()).message == LOADING
    await asyncio.to_thread(builds.started.wait, 60)
    assert demo.stop("tab-1") is True
    (stopped,) = await collect(stream)
    assert stopped.state == "stopped" and stopped.files == ()
    builds.gate.set()  # the load finishes for the next request
    updates = await collect(demo.run("tab-1", clip, QUERY))
    assert updates[-1].state == "done" and builds.count == 1


async def test_a_model_that_cannot_load_is_a_message_and_is_tried_again(tmp_path: Path):
    builds = VideoAgentBuilds(error=SegmenterError("no SAM 3 video weights\nhere"))
    demo = make(tmp_path, builds)
    clip = upload(tmp_path)
    updates = await collect(demo.run("tab-1", clip, QUERY))
    assert [u.state for u in updates] == ["running", "error"]
    assert updates[-1].message == "SegmenterError: no SAM 3 video weights here"
    builds.error = None
    again = await collect(demo.run("tab-1", clip, QUERY))
    assert again[-1].state == "done" and builds.count == 2


async def test_one_request_per_page_at_a_time(tmp_path: Path):
    chat = HeldChat(hold=0)
    demo = make(tmp_path, VideoAgentBuilds(chat))
    clip = upload(tmp_path)
    stream = demo.run("tab-1", clip, QUERY)
    await stream.__anext__()
    (refused,) = await collect(demo.run("tab-1", clip, "the dog"))
    assert refused.state == "error" and "already running" in refused.message
    await chat.waiting.wait()
    demo.stop("tab-1")
    await collect(stream)


def test_the_image_and_the_video_tab_run_on_one_runner_shape() -> None:
    from sam3_agent.apps.demo.sessions import DemoRunner, SessionRunner

    assert issubclass(DemoRunner, SessionRunner) and issubclass(VideoDemoRunner, SessionRunner)
    # One streaming, stopping and ending path: neither tab's runner has its own.
    for name in ("_answer", "_final", "stop"):
        assert name not in vars(DemoRunner) and name not in vars(VideoDemoRunner)
