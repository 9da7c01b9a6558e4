"""The service's video endpoints at their bounds and against hostile input (issue 18): bytes,
frames and pixels per frame refused with 413, corrupt uploads and tars with 400, bad track
requests with 4xx, all one-line JSON; 503 + ``Retry-After`` past the concurrency bounds;
videos kept on disk in a store bounded in bytes and deleted on eviction and at shutdown.

A fake video segmenter answers from the clip's ground truth, so nothing here loads a model.
Requests go through ``TestClient`` or ``httpx.ASGITransport``; waits are on events and the
gates' own counters, never on the clock.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import tarfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.apps.service.app import create_app
from sam3_agent.apps.service.limits import ServiceLimits
from sam3_agent.apps.service.video_store import StoredVideo, VideoStore
from sam3_agent.backends.schemas import TAR_MIME
from sam3_agent.media.video import VideoLoadError, VideoSource, open_video
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.tracks import Tracks
from tests.support.clips import LEFT_AND_RIGHT, render_frame, write_mp4
from tests.support.fakes import FakeSegmenter, FakeVideoEmbedding, FakeVideoSegmenter

TOKEN = "limits-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANG_GUARD_S = 60.0  # only a hung test fails on it; no assertion depends on time


def fake_tracker() -> FakeVideoSegmenter:
    return FakeVideoSegmenter({"square": LEFT_AND_RIGHT})


def video_app(tmp_path: Path, segmenter: Any = None, **limits: Any) -> FastAPI:
    return create_app(
        FakeSegmenter(),
        token=TOKEN,
        video_segmenter=segmenter or fake_tracker(),
        video_dir=tmp_path,
        limits=ServiceLimits(**limits),
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "service").mkdir()
    app = video_app(
        tmp_path / "service", max_video_bytes=200_000, max_video_frames=8, max_pixels=20_000
    )
    with TestClient(app, headers=AUTH) as test_client:
        yield test_client


def store_of(client: TestClient) -> VideoStore:
    store = client.app.state.videos  # type: ignore[attr-defined]
    assert isinstance(store, VideoStore)
    return store


def files_in(store: VideoStore) -> list[str]:
    return sorted(p.name for p in store.root.iterdir())


def frame_bytes(index: int = 0, size: tuple[int, int] = (96, 128), suffix: str = ".jpg") -> bytes:
    bgr = cv2.cvtColor(render_frame(LEFT_AND_RIGHT, index, size), cv2.COLOR_RGB2BGR)
    ok, data = cv2.imencode(suffix, bgr)
    assert ok
    return data.tobytes()


def tar_of(members: Sequence[tuple[str, bytes] | tarfile.TarInfo]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def assert_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["error"], str) and body["error"] and "\n" not in body["error"]
    assert "Traceback" not in response.text
    return str(body["error"])


def upload(client: TestClient, data: bytes, tar: bool = False) -> httpx.Response:
    headers = {"Content-Type": TAR_MIME} if tar else {}
    return client.post("/v1/videos", content=data, headers=headers)


# --- uploads ---------------------------------------------------------------------------


def test_a_tar_of_frames_is_a_video(client: TestClient) -> None:
    frames = [(f"./{i:05d}.jpg", frame_bytes(i)) for i in range(3)]
    directory = tarfile.TarInfo(".")
    directory.type = tarfile.DIRTYPE
    answer = upload(client, tar_of([directory, *frames]), tar=True)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["kind"] == "frames" and doc["frame_count"] == 3 and doc["size"] == [96, 128]
    (stored,) = files_in(store_of(client))
    assert stored.endswith(".frames")  # the tar itself is gone once unpacked
    again = upload(client, tar_of([directory, *frames]), tar=True)
    assert again.json()["video_id"] == doc["video_id"] and len(store_of(client)) == 1
    assert files_in(store_of(client)) == [stored]


def test_an_upload_over_the_byte_limit_is_413_before_and_while_reading(
    client: TestClient,
) -> None:
    declared = upload(client, b"\x00" * 200_001)
    assert "200000-byte limit" in assert_error(declared, 413, "too_large")

    def chunks() -> Iterator[bytes]:
        for _ in range(30):
            yield b"\x00" * 10_000

    streamed = client.post("/v1/videos", content=chunks())
    assert_error(streamed, 413, "too_large")
    assert files_in(store_of(client)) == []  # the partial file is deleted


def test_too_many_frames_is_413(client: TestClient, tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "long.mp4", 9)
    assert "at most 8" in assert_error(upload(client, clip.read_bytes()), 413, "too_large")
    frames = [(f"{i:05d}.jpg", frame_bytes(i)) for i in range(9)]
    assert_error(upload(client, tar_of(frames), tar=True), 413, "too_large")
    assert files_in(store_of(client)) == []


def test_frames_over_the_pixel_limit_are_413(client: TestClient, tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "big.mp4", 2, size=(160, 192))  # 30720 > 20000 pixels
    message = assert_error(upload(client, clip.read_bytes()), 413, "too_large")
    assert "<upload>" in message and str(tmp_path) not in message
    small = frame_bytes(0)
    big = frame_bytes(1, size=(160, 192))
    assert_error(
        upload(client, tar_of([("a.jpg", small), ("b.png", big)]), tar=True), 413, "too_large"
    )
    assert files_in(store_of(client)) == []


@pytest.mark.parametrize(
    "data",
    [b"\x00" * 1000, b"not a video at all", b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64],
)
def test_a_corrupt_video_is_400(client: TestClient, data: bytes) -> None:
    message = assert_error(upload(client, data), 400, "bad_video")
    assert str(store_of(client).root) not in message
    assert files_in(store_of(client)) == []


def test_an_empty_body_is_400(client: TestClient) -> None:
    assert_error(upload(client, b""), 400, "bad_video")
    assert_error(upload(client, b"", tar=True), 400, "bad_video")


def test_a_truncated_file_keeps_the_frames_before_the_damage(tmp_path: Path) -> None:
    whole = write_mp4(tmp_path / "clip.avi", 30, fourcc="MJPG").read_bytes()
    lost_index = write_mp4(tmp_path / "clip.mp4", 30).read_bytes()
    with TestClient(video_app(tmp_path), headers=AUTH) as test_client:
        answer = upload(test_client, whole[: len(whole) * 2 // 3])
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        assert 0 < doc["frame_count"] < 30 and "declares 30 frames" in doc["note"]
        cut = upload(test_client, lost_index[: len(lost_index) // 2])
        assert "cannot read video <upload>" in assert_error(cut, 400, "bad_video")


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def _fifo(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.FIFOTYPE
    return info


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("../escape.jpg", frame_bytes())], "top level"),
        ([("/abs.jpg", frame_bytes())], "top level"),
        ([("sub/0.jpg", frame_bytes())], "top level"),
        ([_symlink("a.jpg", "/etc/passwd")], "not a regular file"),
        ([_fifo("a.jpg")], "not a regular file"),
        ([("notes.txt", b"hello")], "not a frame image"),
        ([("a.jpg", frame_bytes()), ("./a.jpg", frame_bytes())], "two frames"),
        ([("a.jpg", b"not a jpeg")], "not a readable image"),
        ([], "no frame images"),
    ],
)
def test_hostile_tars_are_400_and_write_nothing_outside(
    client: TestClient, tmp_path: Path, members: list[Any], message: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    error = assert_error(upload(client, tar_of(members), tar=True), 400, "bad_video")
    assert message in error
    assert files_in(store_of(client)) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_compressed_tar_is_400(client: TestClient) -> None:
    data = gzip.compress(tar_of([("a.jpg", frame_bytes())]))
    assert "uncompressed tar" in assert_error(upload(client, data, tar=True), 400, "bad_video")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=4096), tar=st.booleans())
def test_any_bytes_uploaded_are_answered_below_500(
    client: TestClient, data: bytes, tar: bool
) -> None:
    answer = upload(client, data, tar=tar)
    assert answer.status_code < 500, answer.text
    if answer.status_code != 200:
        assert_error(answer, answer.status_code, answer.json()["code"])
        assert len(files_in(store_of(client))) == len(store_of(client))


# --- track requests --------------------------------------------------------------------


@pytest.fixture
def video_id(client: TestClient, tmp_path: Path) -> str:
    answer = upload(client, write_mp4(tmp_path / "clip.mp4", 6).read_bytes())
    assert answer.status_code == 200, answer.text
    return str(answer.json()["video_id"])


def track(client: TestClient, video_id: str, body: Any) -> httpx.Response:
    return client.post(f"/v1/videos/{video_id}/track", json=body)


def test_tracks_of_the_frames_asked_for(client: TestClient, video_id: str, tmp_path: Path) -> None:
    answer = track(client, video_id, {"phrases": ["square"], "frames": [1, 3, 4]})
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["frames_used"] == [1, 3, 4]
    tracks = Tracks.from_json(doc["results"][0]["tracks"])
    source = open_video(tmp_path / "clip.mp4")
    want = FakeVideoEmbedding(replace(source, indices=(1, 3, 4)), {"square": LEFT_AND_RIGHT}).track(
        ["square"], 0.5
    )[0]
    assert tracks == want and len(tracks) == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"phrases": []}, 422, "invalid_request"),
        ({"phrases": ["  "]}, 422, "invalid_request"),
        ({"phrases": ["x" * 1001]}, 422, "invalid_request"),
        ({"phrases": "square"}, 422, "invalid_request"),
        ({"phrases": ["square"], "score_threshold": 2}, 422, "invalid_request"),
        ({"phrases": ["square"], "frames": [2, 1]}, 422, "invalid_request"),
        ({"phrases": ["square"], "frames": [-1]}, 422, "invalid_request"),
        ({"phrases": ["square"], "frames": []}, 422, "invalid_request"),
        ({"phrases": ["square"], "frames": [0], "stride": 2}, 422, "invalid_request"),
        ({"phrases": ["square"], "frames": [6]}, 422, "invalid_request"),
        ({"phrases": ["square"], "start_s": 5, "end_s": 1}, 422, "invalid_request"),
        ({"phrases": ["square"], "start_s": 100}, 422, "invalid_request"),
        ({"phrases": ["square"], "stride": 0}, 422, "invalid_request"),
        ({"phrases": ["square"], "image_id": "x"}, 422, "invalid_request"),
        ([1, 2], 422, "invalid_request"),
    ],
)
def test_bad_track_requests_are_4xx(
    client: TestClient, video_id: str, body: Any, status: int, code: str
) -> None:
    assert_error(track(client, video_id, body), status, code)


def test_bad_json_and_unknown_ids(client: TestClient, video_id: str) -> None:
    bad = client.post(f"/v1/videos/{video_id}/track", content=b"{not json")
    assert_error(bad, 400, "bad_json")
    unknown = track(client, "0" * 64, {"phrases": ["square"]})
    assert "upload it to /v1/videos again" in assert_error(unknown, 404, "unknown_video")
    odd = track(client, "..%2F..%2Fetc", {"phrases": ["square"]})
    assert odd.status_code == 404
    newline = track(client, "a" * 64 + "%0A", {"phrases": ["square"]})
    assert_error(newline, 404, "unknown_video")  # one line, whatever the id holds


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(["phrases", "frames", "stride", "start_s", "fps", "x"]) | st.text(),
                inner,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_any_json_track_body_is_answered_below_500(
    client: TestClient, video_id: str, body: Any
) -> None:
    answer = client.post(
        f"/v1/videos/{video_id}/track",
        content=json.dumps(body, allow_nan=True).encode(),
    )
    assert answer.status_code < 500, answer.text


def test_a_time_range_on_frames_needs_fps(client: TestClient) -> None:
    video = upload(client, tar_of([(f"{i}.jpg", frame_bytes(i)) for i in range(4)]), tar=True)
    video_id = video.json()["video_id"]
    no_fps = track(client, video_id, {"phrases": ["square"], "start_s": 0.1})
    assert "`fps`" in assert_error(no_fps, 422, "invalid_request")
    with_fps = track(client, video_id, {"phrases": ["square"], "start_s": 0.1, "fps": 10})
    assert with_fps.status_code == 200 and with_fps.json()["frames_used"] == [1, 2, 3]


class FailingTracker:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def open(self, video: VideoSource) -> FailingTracker:
        return self

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (SegmenterError("out of memory"), 503, "segmenter_failed"),
        (VideoLoadError("frame 3 can no longer be read"), 400, "bad_video"),
        (RuntimeError("a bug"), 500, "internal_error"),
    ],
)
def test_tracker_failures_are_json(
    tmp_path: Path, error: Exception, status: int, code: str
) -> None:
    app = video_app(tmp_path, FailingTracker(error))
    with TestClient(app, headers=AUTH, raise_server_exceptions=False) as test_client:
        video_id = upload(test_client, write_mp4(tmp_path / "c.mp4", 2).read_bytes()).json()[
            "video_id"
        ]
        assert_error(track(test_client, video_id, {"phrases": ["square"]}), status, code)


# --- concurrency bounds -----------------------------------------------------------------


class BlockingTracker(FakeVideoSegmenter):
    """The fake tracker, waiting for ``release`` (a thread event) inside ``track``."""

    def __init__(self) -> None:
        super().__init__({"square": LEFT_AND_RIGHT})
        self.release = threading.Event()

    def open(self, video: VideoSource) -> FakeVideoEmbedding:
        embedding = super().open(video)
        inner = embedding.track

        def track(phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
            assert self.release.wait(HANG_GUARD_S)
            return inner(phrases, score_threshold)

        embedding.track = track  # type: ignore[method-assign]
        return embedding


async def until(condition: Any) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


def run(app: FastAPI, scenario: Any) -> None:
    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://service", headers=AUTH
        ) as http:
            await scenario(http)

    asyncio.run(main())


def assert_busy(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["code"] == "busy"


def test_track_requests_past_their_bound_get_503_with_retry_after(tmp_path: Path) -> None:
    tracker = BlockingTracker()
    app = video_app(tmp_path, tracker, max_concurrent_tracks=1, max_waiting=1)
    data = write_mp4(tmp_path / "c.mp4", 3).read_bytes()
    answers: list[httpx.Response] = []

    async def scenario(http: httpx.AsyncClient) -> None:
        video_id = (await http.post("/v1/videos", content=data)).json()["video_id"]
        path, body = f"/v1/videos/{video_id}/track", {"phrases": ["square"]}
        at_work = asyncio.create_task(http.post(path, json=body))
        await until(lambda: app.state.tracks.held == 1)
        waiting = asyncio.create_task(http.post(path, json=body))
        await until(lambda: app.state.tracks.waiting == 1)
        assert_busy(await http.post(path, json=body))
        tracker.release.set()
        answers.extend(await asyncio.gather(at_work, waiting))

    run(app, scenario)
    assert [a.status_code for a in answers] == [200, 200]
    assert app.state.tracks.peak == 1 and app.state.tracks.refused == 1


def test_video_uploads_share_the_upload_slots(tmp_path: Path) -> None:
    app = video_app(tmp_path, max_concurrent_uploads=1, max_waiting=0)
    data = write_mp4(tmp_path / "c.mp4", 3).read_bytes()
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield data[:16]
        started.set()
        await release.wait()
        yield data[16:]

    async def scenario(http: httpx.AsyncClient) -> None:
        first = asyncio.create_task(http.post("/v1/videos", content=slow_body()))
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)
        await until(lambda: app.state.uploads.held == 1)
        assert_busy(await http.post("/v1/videos", content=data))
        assert_busy(await http.post("/v1/images", content=b"\x89PNG"))
        release.set()
        assert (await first).status_code == 200

    run(app, scenario)


# --- the store on disk -----------------------------------------------------------------


def stored(store: VideoStore, video_id: str, nbytes: int) -> StoredVideo:
    path = store.incoming()
    path.write_bytes(b"\x00" * nbytes)
    source = VideoSource(path, "file", (0,), (2, 2), None, 1, 100)
    return StoredVideo(video_id, "file", path, nbytes, source)


@settings(max_examples=60, deadline=None)
@given(
    uploads=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 40)), max_size=25),
    bound=st.integers(1, 100),
)
def test_the_store_stays_within_its_bytes_and_deletes_what_it_evicts(
    tmp_path_factory: pytest.TempPathFactory,
    uploads: list[tuple[str, int]],
    bound: int,
) -> None:
    store = VideoStore(bound, tmp_path_factory.mktemp("store"))
    try:
        for video_id, size in uploads:
            kept = store.add(stored(store, video_id, size))
            assert store.get(video_id) is kept  # the newest is always kept
            assert store.bytes_used <= bound or len(store) == 1
            on_disk = sum(p.stat().st_size for p in store.root.iterdir())
            assert on_disk == store.bytes_used  # evicted and duplicate files are gone
    finally:
        store.close()
    assert not store.root.exists()


def test_a_video_in_use_is_deleted_only_when_its_use_ends(tmp_path: Path) -> None:
    store = VideoStore(10, tmp_path)
    first = store.add(stored(store, "a", 8))
    with store.use("a") as in_use:
        assert in_use is first
        store.add(stored(store, "b", 8))  # evicts "a" from the store...
        assert "a" not in store and first.path.exists()  # ...but not from under its reader
        with store.use("a") as gone:
            assert gone is None
    assert not first.path.exists()
    store.close()


def test_shutdown_deletes_every_stored_video(tmp_path: Path) -> None:
    app = video_app(tmp_path)
    with TestClient(app, headers=AUTH) as test_client:
        assert upload(test_client, write_mp4(tmp_path / "c.mp4", 2).read_bytes()).status_code == 200
        root = store_of(test_client).root
        assert len(list(root.iterdir())) == 1
    assert not root.exists()


@pytest.mark.parametrize(
    "name",
    ["max_video_bytes", "max_video_frames", "max_stored_video_bytes", "max_concurrent_tracks"],
)
def test_limits_are_checked(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError, match=name):
        video_app(tmp_path, **{name: 0})


def test_the_image_and_the_video_store_are_one_lru_shape() -> None:
    from sam3_agent.backends.lru import Lru

    assert issubclass(VideoStore, Lru)  # the image store is a plain Lru
    for name in ("get", "keep", "__len__", "__contains__", "bytes_used"):
        assert name not in vars(VideoStore)
