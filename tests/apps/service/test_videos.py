"""The SAM 3 service tracks videos (issue 18): the tiny random SAM 3 video model behind a real
server on 127.0.0.1, :class:`RemoteVideoSegmenter` against it, and ``sam3-agent track
--sam3-url`` giving the same tracks as SAM 3 in process.

Nothing here contacts any other address; no assertion depends on time.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import uvicorn
from fastapi import FastAPI
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app as cli_app
from sam3_agent.apps.cli.serve import serve_sam3
from sam3_agent.apps.service import server as service_server
from sam3_agent.apps.service.app import create_app
from sam3_agent.apps.service.limits import ServiceLimits
from sam3_agent.backends.base import VideoSegmenter
from sam3_agent.backends.sam3_remote import RemoteVideoSegmenter
from sam3_agent.backends.sam3_video import Sam3VideoSegmenter
from sam3_agent.backends.segmenters import build_video_segmenter
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.media.video import VideoSource, open_video
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import SegmenterError, UserError
from tests.support.clips import write_frames, write_mp4
from tests.support.fakes import FakeSegmenter, FakeVideoSegmenter
from tests.support.openai_server import ScriptedServer, serve
from tests.support.video_cli import respond

TOKEN = "video-token-5b1c"
PHRASES = ["square", "a red square moving left"]


@contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port, its startup and shutdown run
    (the video store is deleted at shutdown); yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # only a hung start fails on it
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def offline_module() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield


def tiny_video(directory: Path) -> Sam3VideoSegmenter:
    return Sam3VideoSegmenter.from_pretrained(directory, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def local(tiny_sam3_video_dir: Path, offline_module: None) -> Sam3VideoSegmenter:
    """SAM 3's video model in this process, as ``sam3-agent track`` loads it."""
    return tiny_video(tiny_sam3_video_dir)


@pytest.fixture(scope="module")
def served(
    tiny_sam3_video_dir: Path, offline_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, FastAPI]]:
    """The service with the same tiny video model (loaded on its own, as serve-sam3 does)."""
    app = create_app(
        FakeSegmenter(),
        token=TOKEN,
        video_segmenter=tiny_video(tiny_sam3_video_dir),
        video_dir=tmp_path_factory.mktemp("service_videos"),
    )
    with running(app) as url:
        yield url, app


@pytest.fixture
def url(served: tuple[str, FastAPI]) -> str:
    return served[0]


@pytest.fixture
def app(served: tuple[str, FastAPI]) -> FastAPI:
    return served[1]


class CountingTransport(httpx.BaseTransport):
    """Passes requests to the network, recording ``METHOD path`` of each."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def clip_sources(tmp_path: Path) -> dict[str, VideoSource]:
    clip = write_mp4(tmp_path / "clip.mp4", 6)
    frames = write_frames(tmp_path / "frames", 7)
    return {
        "file": open_video(clip),
        "file, every 2nd of 5": open_video(clip, FrameSelection(stride=2, max_frames=3)),
        "frames, every 3rd": open_video(frames, FrameSelection(stride=3)),
    }


# --- the same tracks as in process ------------------------------------------------------


def test_remote_tracks_are_the_in_process_tracks(
    url: str, local: Sam3VideoSegmenter, tmp_path: Path
) -> None:
    for name, source in clip_sources(tmp_path).items():
        with RemoteVideoSegmenter(url, TOKEN) as remote:
            assert isinstance(remote, VideoSegmenter)
            embedding = remote.open(source)
            got = embedding.track(PHRASES, 0.0)
        want = local.open(source).track(PHRASES, 0.0)
        assert len(got) == len(PHRASES)
        assert any(len(t) for t in got), name  # the comparison is not of empty answers
        for g, w in zip(got, want, strict=True):
            assert g.frame_count == source.frame_count and g.size == source.size
            assert g == w, name
        assert embedding.used_phrase(PHRASES[1]) == local.used_phrase(PHRASES[1])


def test_each_video_is_uploaded_once(url: str, tmp_path: Path) -> None:
    source = open_video(write_mp4(tmp_path / "clip.mp4", 3))
    transport = CountingTransport()
    with RemoteVideoSegmenter(url, TOKEN, transport=transport) as remote:
        remote.check()
        first = remote.open(source)
        again = remote.open(open_video(source.path, FrameSelection(stride=2)))
        first.track(["square"], 0.5)
        again.track(["square"], 0.5)
    assert first.video_id == again.video_id
    assert transport.requests == [
        "GET /health",
        "GET /v1/health",
        "GET /v1/videos",
        "POST /v1/videos",
        f"POST /v1/videos/{first.video_id}/track",
        f"POST /v1/videos/{first.video_id}/track",
    ]


def test_an_evicted_video_is_uploaded_again_and_deleted_from_disk(
    tiny_sam3_video_dir: Path, offline_module: None, tmp_path: Path
) -> None:
    app = create_app(
        FakeSegmenter(),
        video_segmenter=tiny_video(tiny_sam3_video_dir),
        video_dir=tmp_path,
        limits=ServiceLimits(max_stored_video_bytes=1),  # only the newest video stays
    )
    first = open_video(write_mp4(tmp_path / "a.mp4", 3))
    other = write_mp4(tmp_path / "b.mp4", 4)
    with running(app) as url, RemoteVideoSegmenter(url) as remote:
        store = app.state.videos
        embedding = remote.open(first)
        evicted_id = embedding.video_id
        (stored_first,) = list(store.root.iterdir())
        remote.open(open_video(other))  # evicts the first from the store and from disk
        assert evicted_id not in store and not stored_first.exists()
        tracks = embedding.track(["square"], 0.0)
        assert embedding.video_id == evicted_id and evicted_id in store
        assert tracks[0].frame_count == 3
        root = store.root
    assert not root.exists()  # the server's shutdown deleted every stored video


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        (
            {"max_video_bytes": 1000},
            r"is \d+ bytes; .* takes at most 1000 \(serve-sam3 --max-video-mb\)",
        ),
        ({"max_video_frames": 4}, r"has 5 frames; .* at most 4 \(serve-sam3 --max-video-frames\)"),
    ],
)
def test_a_video_over_the_service_bounds_is_refused_before_it_is_sent(
    tmp_path: Path, bounds: dict[str, int], message: str
) -> None:
    app = create_app(
        FakeSegmenter(),
        video_segmenter=FakeVideoSegmenter({}),
        video_dir=tmp_path,
        limits=ServiceLimits(**bounds),
    )
    clip = write_mp4(tmp_path / "clip.mp4", 5)
    transport = CountingTransport()
    with running(app) as url, RemoteVideoSegmenter(url, transport=transport) as remote:
        remote.check()
        with pytest.raises(SegmenterError, match=message):
            remote.open(open_video(clip, FrameSelection(max_frames=2)))  # a file goes whole
    assert "POST /v1/videos" not in transport.requests


def test_a_retried_upload_sends_the_whole_body_again(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 3)
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.read())
        if len(bodies) == 1:
            return httpx.Response(503, headers={"Retry-After": "0"}, json={"error": "busy"})
        answer = {"video_id": "b" * 64, "kind": "file", "frame_count": 3, "size": [96, 128]}
        return httpx.Response(200, json={**answer, "fps": 10.0})

    transport = httpx.MockTransport(handler)
    with RemoteVideoSegmenter("http://sam3.test", transport=transport) as remote:
        embedding = remote.open(open_video(clip))
    assert embedding.video_id == "b" * 64
    assert bodies == [clip.read_bytes(), clip.read_bytes()]


def test_track_a_selection_through_the_wire_format(url: str, tmp_path: Path) -> None:
    """What a client other than ours sends: a selection instead of frame indices."""
    clip = write_mp4(tmp_path / "clip.mp4", 7, fps=10.0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, headers=headers, timeout=600) as http:
        limits = http.get("/v1/videos").json()
        assert limits["max_video_frames"] >= 7 and limits["max_video_bytes"] > 0
        uploaded = http.post("/v1/videos", content=clip.read_bytes()).json()
        assert uploaded["kind"] == "file" and uploaded["frame_count"] == 7
        assert uploaded["size"] == [96, 128] and uploaded["fps"] == 10.0
        body = {"phrases": ["square"], "score_threshold": 0.0, "start_s": 0.2, "stride": 2}
        answer = http.post(f"/v1/videos/{uploaded['video_id']}/track", json=body)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["frames_used"] == [2, 4, 6] and doc["size"] == [96, 128]
    (result,) = doc["results"]
    assert result["phrase"] == "square" and result["tracks"]["frame_count"] == 3
    for track in result["tracks"]["tracks"]:
        assert set(track["masks"]) <= {"0", "1", "2"}
        assert all(rle["size"] == [96, 128] for rle in track["masks"].values())


# --- the agent's CLI through the service --------------------------------------------------


@pytest.fixture
def mllm() -> Iterator[ScriptedServer]:
    with serve(ScriptedServer(responder=respond)) as server:
        yield server


def test_track_cli_with_sam3_url_writes_the_in_process_tracks(
    url: str,
    tiny_sam3_video_dir: Path,
    mllm: ScriptedServer,
    hf_offline: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 6)
    common = ["--llm-url", mllm.base_url, "--llm-model", "test-vlm", "--llm-api-key", "k"]
    common += ["--score-threshold", "0.0", "--stride", "2"]
    in_process = ["--sam3", str(tiny_sam3_video_dir), "--device", "cpu", "--dtype", "float32"]
    monkeypatch.setenv("SAM3_AGENT_TOKEN", TOKEN)
    runs = {}
    for name, backend in (("local", in_process), ("remote", ["--sam3-url", url])):
        out = tmp_path / name
        done = CliRunner().invoke(
            cli_app, ["track", str(clip), "the square", "--out", str(out), *backend, *common]
        )
        assert done.exit_code == 0, done.output
        runs[name] = json.loads((out / "result.json").read_text())
    local, remote = runs["local"], runs["remote"]
    assert remote["status"] == local["status"] == "masks"
    assert remote["video"]["frames_used"] == local["video"]["frames_used"] == [0, 2, 4]
    assert remote["tracks"] == local["tracks"] and remote["tracks"]


def test_build_video_segmenter_with_a_url_is_the_service() -> None:
    built = build_video_segmenter(url="http://127.0.0.1:1", token="t")
    assert isinstance(built, RemoteVideoSegmenter) and isinstance(built, VideoSegmenter)
    spec = BackendSpec(sam3_url="http://127.0.0.1:1", sam3_token="t")
    from_spec = spec.build_video_segmenter()
    assert isinstance(from_spec, RemoteVideoSegmenter)
    assert from_spec.describe() == built.describe()


# --- refusals: token, a service without video, phrases ------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/videos"), ("POST", "/v1/videos"), ("POST", f"/v1/videos/{'a' * 64}/track")],
)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_every_video_endpoint_needs_the_token(
    url: str, app: FastAPI, method: str, path: str, headers: dict[str, str]
) -> None:
    stored = len(app.state.videos)
    response = httpx.request(method, f"{url}{path}", headers=headers, content=b"x" * 100)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert len(app.state.videos) == stored


def test_a_wrong_token_fails_the_preflight_in_one_line(url: str, tmp_path: Path) -> None:
    with RemoteVideoSegmenter(url, "wrong", retries=0) as remote:
        with pytest.raises(SegmenterError, match="refused the token") as caught:
            remote.check()
        assert "\n" not in str(caught.value)
        with pytest.raises(SegmenterError, match="refused the token"):
            remote.open(open_video(write_mp4(tmp_path / "clip.mp4", 2)))


def test_a_service_without_video_says_how_to_start_one(tmp_path: Path) -> None:
    app = create_app(FakeSegmenter(), token=TOKEN)
    assert app.state.videos is None
    with running(app) as url:
        remote = RemoteVideoSegmenter(url, TOKEN, retries=0)
        with remote, pytest.raises(SegmenterError, match="serve-sam3 --video"):
            remote.check()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for method, path in (("GET", "/v1/videos"), ("POST", "/v1/videos")):
            response = httpx.request(method, f"{url}{path}", headers=headers, content=b"x")
            assert response.status_code == 404 and response.json()["code"] == "video_off"


@pytest.mark.parametrize("phrases", [["   "], ["\x00\x01"], "square", ["x" * 1001]])
def test_the_client_refuses_the_phrases_sam3_in_process_refuses(
    url: str, local: Sam3VideoSegmenter, tmp_path: Path, phrases: Any
) -> None:
    source = open_video(write_mp4(tmp_path / "clip.mp4", 2))
    with RemoteVideoSegmenter(url, TOKEN) as remote:
        embedding = remote.open(source)
        with pytest.raises(UserError) as remote_error:
            embedding.track(phrases, 0.5)
    with pytest.raises(UserError) as local_error:
        local.open(source).track(phrases, 0.5)
    assert str(remote_error.value) == str(local_error.value)


def test_control_characters_are_cleaned_as_in_process(
    url: str, local: Sam3VideoSegmenter, tmp_path: Path
) -> None:
    source = open_video(write_mp4(tmp_path / "clip.mp4", 3))
    phrase = "red\tsquare\x00 moving\ud800left"
    with RemoteVideoSegmenter(url, TOKEN) as remote:
        (got,) = remote.open(source).track([phrase], 0.0)
    (want,) = local.open(source).track([phrase], 0.0)
    assert got == want


# --- serve-sam3 --video --------------------------------------------------------------------


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("serve-sam3")(serve_sam3)

    @app.command("other")
    def other() -> None:  # a second command keeps typer from flattening the group
        pass

    return app


@pytest.fixture
def captured_serve(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_serve(segmenter: Any, *, limits: ServiceLimits, **kwargs: Any) -> None:
        # One ServiceLimits carries every bound; its fields are read as the call's.
        calls.append({"segmenter": segmenter, **kwargs, **dataclasses.asdict(limits)})

    monkeypatch.setattr(service_server, "serve", fake_serve)
    return calls


def test_serve_sam3_video_loads_the_video_model_from_the_same_weights(
    cli: typer.Typer,
    tiny_sam3_video_dir: Path,
    hf_offline: None,
    captured_serve: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    args = ["serve-sam3", "--sam3", str(tiny_sam3_video_dir), "--device", "cpu"]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 0, plain.output
    assert captured_serve[0]["video_segmenter"] is None  # images only: no video model held
    video_args = [*args, "--video", "--video-cache-mb", "3", "--max-video-mb", "2"]
    video_args += ["--max-video-frames", "50", "--video-store-mb", "10", "--video-dir"]
    video_args += [str(tmp_path), "--max-concurrent-tracks", "2"]
    done = CliRunner().invoke(cli, video_args)
    assert done.exit_code == 0, done.output
    call = captured_serve[1]
    assert isinstance(call["video_segmenter"], Sam3VideoSegmenter)
    assert call["video_segmenter"].feature_cache.max_bytes == 3 * 1024**2
    assert call["max_video_bytes"] == 2 * 1024**2 and call["max_video_frames"] == 50
    assert call["max_stored_video_bytes"] == 10 * 1024**2 and call["video_dir"] == tmp_path
    assert call["max_concurrent_tracks"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-video-frames", "0"], "--max-video-frames"),
        (["--video-store-mb", "-1"], "--video-store-mb"),
        (["--max-concurrent-tracks", "0"], "--max-concurrent-tracks"),
        (["--video-cache-mb", "-1"], "video-cache-mb"),
        (["--video-dir", "FILE"], "is a file, not a directory"),
    ],
)
def test_serve_sam3_refuses_bad_video_flags_before_loading(
    cli: typer.Typer,
    captured_serve: list[dict[str, Any]],
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    args = [str(file) if a == "FILE" else a for a in args]
    done = CliRunner().invoke(
        cli, ["serve-sam3", "--sam3", str(tmp_path / "none"), "--video", *args]
    )
    assert done.exit_code == 2, done.output
    assert message in done.output and len(done.output.strip().splitlines()) == 1
    assert captured_serve == []
