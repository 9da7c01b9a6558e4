"""The demo's video tab over HTTP with ``gradio_client``: ``/run_video`` streams the rounds and
ends with the overlay as WebM and the downloads, ``/stop_video`` ends a session, a refused
upload is one line, and the image tab beside it still answers ``/run``.

The real app and runners; the video agent is built by the runner on the first video request
(the fake video segmenter and a scripted model, see ``video_demo``), the image agent talks to
the scripted MLLM server (see ``demo_fixtures``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sam3_agent.agent.loop import STOPPED
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.demo.server import create_app
from sam3_agent.apps.demo.sessions import VideoDemoRunner
from tests.support.demo_fixtures import COFFEE, CoffeeScript, coffee_runner, serve_app, wait_for
from tests.support.media_server import Route, media_server
from tests.support.openai_server import ScriptedServer, serve
from tests.support.video_demo import QUERY, HeldChat, VideoAgentBuilds, upload

pytest.importorskip("gradio", reason="the demo extra is not installed (pip install .[demo])")
gradio_client = pytest.importorskip("gradio_client")

ROUNDS, STATUS, FINAL, FILES = range(4)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        state.responder = CoffeeScript()
        yield state


def app_with_video(
    server: ScriptedServer, tmp_path: Path, builds: VideoAgentBuilds, **limits: Any
) -> Any:
    video = VideoDemoRunner(builds, tmp_path / "runs" / "video", VideoLimits(**limits))
    return create_app(coffee_runner(server, tmp_path / "runs" / "image"), video_runner=video)


def client(url: str) -> Any:
    return gradio_client.Client(url + "/", verbose=False, download_files=False)


def run_video(c: Any, clip: Path | str, query: str = QUERY, stride: int = 1) -> Any:
    return c.submit(gradio_client.handle_file(str(clip)), query, stride, api_name="/run_video")


def test_run_video_streams_the_rounds_then_the_overlay_and_files(
    server: ScriptedServer, tmp_path: Path
):
    builds = VideoAgentBuilds()
    app = app_with_video(server, tmp_path, builds)
    clip = upload(tmp_path)
    with serve_app(app) as url:
        job = run_video(client(url), clip)
        updates = list(job)
        final = job.result()
        video = final[FINAL]
        mp4 = httpx.get(video["url"]).content
        files = {f["orig_name"]: f["url"] for f in final[FILES]}
        document = httpx.get(files["result.json"]).json()
        # The image tab answers beside it, on the same queue.
        image = client(url).submit(
            gradio_client.handle_file(str(COFFEE)), "the coffee", api_name="/run"
        )
        image_final = image.result()

    statuses = [u[STATUS] for u in updates]
    assert any("loading SAM 3" in s for s in statuses)  # the first video loads the model
    round_counts = [u[ROUNDS].count('class="s3a-round ') for u in updates]
    assert {1, 2} <= set(round_counts) and round_counts == sorted(round_counts)
    assert "s3a-status-done" in final[STATUS] and "1 track(s)" in final[STATUS]
    assert video["orig_name"] == "overlay.mp4" and mp4[4:8] == b"ftyp"  # the H.264 overlay
    assert set(files) == {"result.json", "overlay.mp4", "contact_sheet.png"}
    assert document["status"] == "masks" and document["video"]["path"] == "clip.mp4"
    assert "s3a-status-done" in image_final[1] and builds.count == 1


def test_a_refused_upload_is_one_line_and_no_model_loads(server: ScriptedServer, tmp_path: Path):
    builds = VideoAgentBuilds()
    app = app_with_video(server, tmp_path, builds, max_frames=4)
    with serve_app(app) as url:
        final = run_video(client(url), upload(tmp_path, "long clip.mp4")).result()
    assert "s3a-status-error" in final[STATUS]
    assert "long clip.mp4: 12 frames to track, over this demo&#x27;s limit of 4" in final[STATUS]
    assert "/tmp" not in final[STATUS] and "Traceback" not in final[STATUS]
    assert builds.count == 0
    # Refused before it started: the rounds, video and downloads shown stay as they were.
    assert all(final[i].get("__type__") == "update" for i in (ROUNDS, FINAL, FILES))


def test_a_video_url_sent_as_the_upload_is_refused_and_never_fetched(
    server: ScriptedServer, tmp_path: Path
):
    builds = VideoAgentBuilds()
    with media_server() as clips, serve_app(app_with_video(server, tmp_path, builds)) as url:
        clips.routes["/clip.mp4"] = Route(body=upload(tmp_path).read_bytes())
        with pytest.raises(Exception, match="not URLs"):
            run_video(client(url), clips.url("/clip.mp4")).result()
        assert clips.paths == []
    assert server.completions == []


def test_stop_video_ends_the_session_and_keeps_what_it_had(server: ScriptedServer, tmp_path: Path):
    chat = HeldChat(hold=1)  # the model never answers round 2
    app = app_with_video(server, tmp_path, VideoAgentBuilds(chat))
    with serve_app(app) as url:
        c = client(url)
        job = run_video(c, upload(tmp_path))
        wait_for(
            lambda: any('class="s3a-round ' in o[ROUNDS] for o in job.outputs()),
            what="round 1 in the stream",
        )
        assert c.predict(api_name="/stop_video") == "stopping"
        final = job.result()
        assert c.predict(api_name="/stop_video") == "nothing is running"
        assert c.predict(api_name="/stop") == "nothing is running"  # the image tab's own

    assert "s3a-status-stopped" in final[STATUS] and final[FINAL] is None
    assert {f["orig_name"] for f in final[FILES]} >= {"result.json", "overlay.mp4"}
    (run_dir,) = (tmp_path / "runs" / "video").iterdir()
    assert (run_dir / "result.json").read_text().count(STOPPED) == 1
