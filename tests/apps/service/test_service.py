"""The SAM 3 service and RemoteSegmenter, end to end on 127.0.0.1 with the tiny model.

A real uvicorn server runs in a background thread on a free loopback port; nothing here
contacts any other address.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import pytest
import typer
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sam3_agent.apps.cli.serve import serve_sam3
from sam3_agent.apps.service import server as service_server
from sam3_agent.apps.service.app import create_app
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, ServiceLimits
from sam3_agent.apps.service.server import check_bind_security, is_loopback
from sam3_agent.backends.lru import Lru
from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.backends.sam3_remote import RemoteSegmenter
from sam3_agent.backends.segmenters import build_segmenter
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.backends.wire import decode_masks, encode_masks
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.images import image_digest, load_image
from tests.support.docs import documentation_text
from tests.support.fakes import FakeSegmenter

TOKEN = "test-token-7f3a"
MAX_UPLOAD = 256 * 1024
MAX_PIXELS = 300_000
PHRASES = ["a cat", "the red car", "person on the left"]


def make_image(seed: int, height: int = 120, width: int = 90) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def png_bytes(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def lying_png(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="module")
def offline_module() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def served(tiny_sam3_dir: Path, offline_module: None) -> Iterator[tuple[str, FastAPI]]:
    segmenter = Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu", cache_size=4)
    app = create_app(
        segmenter,
        token=TOKEN,
        limits=ServiceLimits(max_upload_bytes=MAX_UPLOAD, max_pixels=MAX_PIXELS),
    )
    with running(app) as url:
        yield url, app


@pytest.fixture
def url(served: tuple[str, FastAPI]) -> str:
    return served[0]


@pytest.fixture
def app(served: tuple[str, FastAPI]) -> FastAPI:
    return served[1]


@pytest.fixture
def local(tiny_sam3_dir: Path, offline_module: None) -> Sam3Segmenter:
    return Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu")


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


class CountingTransport(httpx.BaseTransport):
    """Passes requests to the network transport and records their paths."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def assert_same(a: Detections, b: Detections) -> None:
    assert len(a) == len(b)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_allclose(a.boxes, b.boxes, rtol=0, atol=1e-3)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5)


def assert_json_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in response.text
    return body


# --- results through the service --------------------------------------------------------


def test_health(url: str) -> None:
    response = httpx.get(f"{url}/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_remote_matches_in_process(url: str, local: Sam3Segmenter, threshold: float) -> None:
    image = make_image(1)
    with RemoteSegmenter(url, TOKEN) as remote:
        embedding = remote.embed(image)
        assert embedding.image_size == (120, 90)
        got = embedding.segment(PHRASES, threshold)
    want = local.embed(image).segment(PHRASES, threshold)
    assert len(got) == len(PHRASES)
    for g, w in zip(got, want, strict=True):
        assert g.masks.shape[1:] == (120, 90)
        assert_same(g, w)


def test_each_image_uploaded_once_and_backbone_runs_once(
    url: str, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = app.state.segmenter._model
    original: Callable[..., Any] = model.get_vision_features
    runs: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        time.sleep(0.1)  # widen the window in which concurrent requests overlap
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "get_vision_features", counted)
    transport = CountingTransport()
    image = make_image(2)
    with RemoteSegmenter(url, TOKEN, transport=transport) as remote:
        embeddings = [remote.embed(image) for _ in range(3)]
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                embeddings[i % 3].segment([PHRASES[i % 3]], 0.0)
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert not errors
    assert transport.paths.count("/v1/images") == 1
    assert transport.paths.count("/v1/segment") == 6
    assert len(runs) == 1


def test_evicted_image_is_uploaded_again(url: str, app: FastAPI, local: Sam3Segmenter) -> None:
    transport = CountingTransport()
    image = make_image(3)
    with RemoteSegmenter(url, TOKEN, transport=transport) as remote:
        embedding = remote.embed(image)
        app.state.images.clear()
        (got,) = embedding.segment(["a cat"], 0.0)
    assert transport.paths == ["/v1/images", "/v1/segment", "/v1/images", "/v1/segment"]
    assert_same(got, local.embed(image).segment(["a cat"], 0.0)[0])


def test_inline_base64_image(http: httpx.Client, local: Sam3Segmenter) -> None:
    image = make_image(4)
    body = {
        "image_base64": base64.b64encode(png_bytes(image)).decode(),
        "phrases": ["a cat"],
        "score_threshold": 0.0,
    }
    response = http.post("/v1/segment", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["image_id"] == image_digest(image)
    assert answer["image_size"] == [120, 90]
    (result,) = answer["results"]
    got = Detections.from_coco_rle(result["masks"], result["boxes"], result["scores"], (120, 90))
    assert_same(got, local.embed(image).segment(["a cat"], 0.0)[0])
    # The inline image is stored: its id now works too.
    again = http.post("/v1/segment", json={"image_id": answer["image_id"], "phrases": ["x"]})
    assert again.status_code == 200


def test_upload_returns_content_hash(http: httpx.Client) -> None:
    image = make_image(5)
    response = http.post("/v1/images", content=png_bytes(image))
    assert response.status_code == 200
    assert response.json() == {"image_id": image_digest(image), "image_size": [120, 90]}


# --- security and malformed requests ------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}],
)
def test_token_required(url: str, headers: dict[str, str]) -> None:
    image = png_bytes(make_image(6))
    response = httpx.post(f"{url}/v1/images", content=image, headers=headers)
    assert_json_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    response = httpx.post(f"{url}/v1/segment", json={"phrases": ["a"]}, headers=headers)
    assert_json_error(response, 401, "unauthorized")


def test_remote_with_wrong_token_fails_clearly(url: str) -> None:
    with (
        RemoteSegmenter(url, "wrong", retries=0) as remote,
        pytest.raises(SegmenterError, match="refused the token"),
    ):
        remote.embed(make_image(6))


def test_upload_over_size_limit(http: httpx.Client) -> None:
    response = http.post("/v1/images", content=b"\0" * (MAX_UPLOAD + 1))
    assert_json_error(response, 413, "too_large")


def test_chunked_upload_over_size_limit(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_UPLOAD // 8192 + 2):
            yield b"\0" * 8192

    response = http.post("/v1/images", content=chunks())
    assert_json_error(response, 413, "too_large")


def test_json_body_over_size_limit(http: httpx.Client) -> None:
    body = {"image_base64": "A" * (MAX_UPLOAD * 2), "phrases": ["a"]}
    assert_json_error(http.post("/v1/segment", json=body), 413, "too_large")


def test_too_many_pixels(http: httpx.Client) -> None:
    big = np.zeros((700, 700, 3), np.uint8)  # 490k pixels, a few KB of PNG
    data = png_bytes(big)
    assert len(data) < MAX_UPLOAD
    body = assert_json_error(http.post("/v1/images", content=data), 413, "too_large")
    assert "pixels" in body["error"]


@pytest.mark.parametrize("size", [(2_000, 2_000), (100_000, 100_000)])
def test_decompression_bomb(http: httpx.Client, size: tuple[int, int]) -> None:
    bomb = lying_png(*size)
    assert_json_error(http.post("/v1/images", content=bomb), 413, "too_large")
    inline = {"image_base64": base64.b64encode(bomb).decode(), "phrases": ["a"]}
    assert_json_error(http.post("/v1/segment", json=inline), 413, "too_large")


@pytest.mark.parametrize("data", [b"", b"not an image at all", png_bytes(make_image(7))[:60]])
def test_unreadable_image(http: httpx.Client, data: bytes) -> None:
    assert_json_error(http.post("/v1/images", content=data), 400, "bad_image")


def test_bad_json(http: httpx.Client) -> None:
    response = http.post(
        "/v1/segment", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_json_error(response, 400, "bad_json")


@pytest.mark.parametrize(
    "body",
    [
        {"phrases": ["a cat"]},  # no image
        {"image_id": "0" * 64, "image_base64": "AAAA", "phrases": ["a"]},  # both
        {"image_id": "0" * 64},  # no phrases
        {"image_id": "0" * 64, "phrases": []},
        {"image_id": "0" * 64, "phrases": ["   "]},
        {"image_id": "0" * 64, "phrases": ["a"] * 33},
        {"image_id": "0" * 64, "phrases": ["a"], "score_threshold": 2},
        {"image_id": "0" * 64, "phrases": ["a"], "extra": 1},
        {"image_id": "../../etc/passwd", "phrases": ["a"]},
        ["not", "an", "object"],
    ],
)
def test_invalid_segment_request(http: httpx.Client, body: Any) -> None:
    body_json = assert_json_error(http.post("/v1/segment", json=body), 422, "invalid_request")
    assert body_json["details"]


def test_bad_base64(http: httpx.Client) -> None:
    response = http.post("/v1/segment", json={"image_base64": "%%%not base64", "phrases": ["a"]})
    assert_json_error(response, 400, "bad_image")


def test_unknown_image_id(http: httpx.Client) -> None:
    response = http.post("/v1/segment", json={"image_id": "a" * 64, "phrases": ["a cat"]})
    body = assert_json_error(response, 404, "unknown_image")
    assert "upload" in body["error"]


def test_unknown_route_and_method(http: httpx.Client) -> None:
    assert_json_error(http.get("/v1/nothing"), 404, "not_found")
    assert http.get("/v1/segment").status_code == 405


class ExplodingSegmenter:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def embed(self, image: np.ndarray) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (SegmenterError("SAM 3 ran out of memory"), 503, "segmenter_failed"),
        (RuntimeError("a bug"), 500, "internal_error"),
    ],
)
def test_segmenter_failures_are_json(error: Exception, status: int, code: str) -> None:
    app = create_app(ExplodingSegmenter(error))
    data = base64.b64encode(png_bytes(make_image(8))).decode()
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/segment", json={"image_base64": data, "phrases": ["a"]})
    assert response.status_code == status
    assert response.json()["code"] == code
    assert "Traceback" not in response.text and "a bug" not in response.text


def test_image_store_is_bounded() -> None:
    store: Lru[str, np.ndarray] = Lru(2, 10_000, lambda image: image.nbytes)
    a, b, c = (np.zeros((10, 10, 3), np.uint8) for _ in range(3))
    store.keep("a", a)
    store.keep("b", b)
    store.get("a")
    store.keep("c", c)
    assert "a" in store and "c" in store and "b" not in store
    store.keep("big", np.zeros((100, 100, 3), np.uint8))
    assert len(store) == 1 and "big" in store


# --- client retries ------------------------------------------------------------------------


def test_client_retries_5xx_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", sleeps.append)
    statuses = [503, 502]
    image = make_image(9)

    def handler(request: httpx.Request) -> httpx.Response:
        if statuses:
            return httpx.Response(statuses.pop(0), json={"error": "busy", "code": "x"})
        return httpx.Response(200, json={"image_id": image_digest(image), "image_size": [120, 90]})

    remote = RemoteSegmenter(
        "http://127.0.0.1:9", retries=3, backoff_s=0.25, transport=httpx.MockTransport(handler)
    )
    assert remote.embed(image).image_id == image_digest(image)
    assert sleeps == [0.25, 0.5]


def test_client_gives_up_on_connection_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", sleeps.append)
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    remote = RemoteSegmenter(
        "http://127.0.0.1:9", retries=2, backoff_s=0.1, transport=httpx.MockTransport(handler)
    )
    with pytest.raises(SegmenterError, match="failed 3 time") as info:
        remote.embed(make_image(9))
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert len(calls) == 3
    assert sleeps == [0.1, 0.2]


def test_client_against_closed_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # find a free loopback port, then leave it closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", lambda s: None)
    with (
        RemoteSegmenter(f"http://127.0.0.1:{port}", retries=1, timeout_s=2) as remote,
        pytest.raises(SegmenterError, match="ConnectError"),
    ):
        remote.embed(make_image(9))


@pytest.mark.parametrize("bad_url", ["ftp://127.0.0.1", "127.0.0.1:8100", "http://"])
def test_client_rejects_bad_urls(bad_url: str) -> None:
    with pytest.raises(UserError):
        RemoteSegmenter(bad_url)


def test_build_segmenter_with_url_is_remote() -> None:
    segmenter = build_segmenter(url="http://127.0.0.1:8100", token=TOKEN)
    assert isinstance(segmenter, RemoteSegmenter)
    segmenter.close()


# --- binding rule and the CLI --------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("gpu-box.example", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_needs_token() -> None:
    with pytest.raises(UserError, match="token"):
        check_bind_security("0.0.0.0", None)
    check_bind_security("0.0.0.0", "t")
    check_bind_security("127.0.0.1", None)


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
        calls.append(
            {"segmenter": segmenter, **kwargs, **dataclasses.asdict(limits), "limits": limits}
        )

    monkeypatch.setattr(service_server, "serve", fake_serve)
    return calls


def test_cli_refuses_public_bind_without_token(
    cli: typer.Typer, monkeypatch: pytest.MonkeyPatch, captured_serve: list[dict[str, Any]]
) -> None:
    monkeypatch.delenv("SAM3_AGENT_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["serve-sam3", "--host", "0.0.0.0"])
    assert result.exit_code == 2  # a usage error, as in every other command
    assert result.output.startswith("error: refusing to listen on 0.0.0.0 without a token")
    assert captured_serve == []


def test_cli_missing_weights_is_one_clean_line(
    cli: typer.Typer, monkeypatch: pytest.MonkeyPatch, captured_serve: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(cli, ["serve-sam3", "--model", "sam3-agent-tests/none"])
    assert result.exit_code == 1
    assert "https://huggingface.co/facebook/sam3" in result.output
    assert "Traceback" not in result.output


def test_cli_serves_the_model_with_its_limits(
    cli: typer.Typer,
    tiny_sam3_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    captured_serve: list[dict[str, Any]],
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SAM3_AGENT_TOKEN", "from-env")
    args = ["serve-sam3", "--sam3", str(tiny_sam3_dir), "--host", "0.0.0.0", "--port", "9100"]
    args += ["--device", "cpu", "--cache-size", "3", "--max-upload-mb", "2", "--max-pixels", "1000"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (call,) = captured_serve
    assert isinstance(call["segmenter"], Sam3Segmenter)
    assert call["host"] == "0.0.0.0" and call["port"] == 9100
    assert call["token"] == "from-env"
    assert call["max_upload_bytes"] == 2 * 1024 * 1024
    assert call["max_pixels"] == 1000


def test_cli_without_limit_flags_serves_the_default_limits(
    cli: typer.Typer, monkeypatch: pytest.MonkeyPatch, captured_serve: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(BackendSpec, "build_segmenter", lambda self: FakeSegmenter())
    result = CliRunner().invoke(cli, ["serve-sam3", "--port", "9100"])
    assert result.exit_code == 0, result.output
    (call,) = captured_serve
    assert call["limits"] == DEFAULT_LIMITS == ServiceLimits()


# --- wire formats, phrases, abusive input, limits (issue 8) --------------------------------


@given(
    count=st.integers(0, 4),
    height=st.integers(1, 23),
    width=st.integers(1, 23),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=50, deadline=None)
def test_rle_orders_round_trip(count: int, height: int, width: int, seed: int) -> None:
    masks = np.random.default_rng(seed).random((count, height, width)) > 0.5
    for order in ("coco", "rows"):
        decoded = decode_masks(encode_masks(masks, order), order, (height, width))
        np.testing.assert_array_equal(decoded, masks)
        assert decoded.dtype == np.bool_ and decoded.flags.c_contiguous
    # "coco" is the standard encoding; "rows" is the standard encoding of the transposes.
    standard = Detections.from_masks(masks, [0.5] * count).to_coco_rle() if count else []
    assert encode_masks(masks, "coco") == standard
    transposed = np.ascontiguousarray(masks.transpose(0, 2, 1))
    assert encode_masks(masks, "rows") == encode_masks(transposed, "coco")


def test_rows_order_needs_no_copy_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    masks = np.random.default_rng(0).random((3, 40, 30)) > 0.5
    copies: list[int] = []
    original = np.asfortranarray
    monkeypatch.setattr(np, "asfortranarray", lambda *a, **k: copies.append(1) or original(*a, **k))
    rles = encode_masks(masks, "rows")
    assert copies == []
    decoded = decode_masks(rles, "rows", (40, 30))
    assert decoded.base is not None  # a view of pycocotools' buffer, not a copy


def test_client_uploads_raw_pixels_and_gets_the_same_id(url: str) -> None:
    transport = CountingTransport()
    image = make_image(20)
    with RemoteSegmenter(url, TOKEN, transport=transport) as raw:
        raw_id = raw.embed(image).image_id
    with RemoteSegmenter(url, TOKEN, upload_format="png") as png:
        png_id = png.embed(image).image_id
    assert raw_id == png_id == image_digest(image)


@pytest.mark.parametrize(
    ("query", "body", "status"),
    [
        ("height=10&width=10", b"\x00" * 299, 400),  # one byte short
        ("height=10&width=10", b"\x00" * 301, 413),  # longer than declared
        ("height=10", b"\x00" * 300, 400),
        ("height=ten&width=10", b"\x00" * 300, 400),
        ("height=0&width=10", b"", 400),
        ("height=1000&width=1000", b"\x00" * 30, 413),  # over the pixel limit, before reading
    ],
)
def test_bad_raw_uploads(http: httpx.Client, query: str, body: bytes, status: int) -> None:
    response = http.post(
        f"/v1/images?{query}", content=body, headers={"Content-Type": "application/x-sam3-rgb8"}
    )
    assert response.status_code == status, response.text
    assert "error" in response.json()


def test_uploaded_photo_is_oriented_and_rescaled_like_the_agent_sees_it(
    http: httpx.Client,
) -> None:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    Image.fromarray(make_image(21, 60, 80)).save(buf, "JPEG", exif=exif.tobytes())
    answer = http.post("/v1/images", content=buf.getvalue()).json()
    assert answer["image_size"] == [80, 60]  # displayed portrait, as the agent loads it
    assert answer["image_id"] == image_digest(load_image(buf.getvalue()))
    depth = io.BytesIO()
    Image.fromarray(np.linspace(0, 65535, 600).astype(np.uint16).reshape(20, 30)).save(depth, "PNG")
    answer = http.post("/v1/images", content=depth.getvalue()).json()
    assert answer["image_id"] == image_digest(load_image(depth.getvalue()))
    assert load_image(depth.getvalue()).max() == 255 and load_image(depth.getvalue()).min() == 0


def test_long_phrase_is_cut_and_reported_not_a_500(url: str) -> None:
    phrase = "the small brown dog sitting on the left side of the old red sofa by the window"
    with RemoteSegmenter(url, TOKEN, retries=0) as remote:
        embedding = remote.embed(make_image(22))
        (detections,) = embedding.segment([phrase], 0.0)
        used = embedding.used_phrase(phrase)
    assert detections.image_size == (120, 90)
    assert phrase.startswith(used) and 20 < len(used) < len(phrase)
    assert embedding.used_phrase("never asked") == "never asked"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"[" * 5000 + b"]" * 5000, 400, "bad_json"),  # RecursionError in json.loads
        (b'{"phrases": [' + b"9" * 5000 + b"]}", 400, "bad_json"),  # past the int digit limit
        # Control characters and lone surrogates are cleaned as in-process, not refused.
        (b'{"image_id": "' + b"0" * 64 + b'", "phrases": ["dog \\ud83d"]}', 404, "unknown_image"),
        (b'{"image_id": "' + b"0" * 64 + b'", "phrases": ["a\\u0000b"]}', 404, "unknown_image"),
        (b'{"image_id": "' + b"0" * 64 + b'", "phrases": ["\\u0000\\ud83d"]}', 422,
         "invalid_request"),
        (b'{"image_id": "' + b"0" * 64 + b'", "phrases": ["a"], "score_threshold": NaN}', 422,
         "invalid_request"),
        (b'{"image_id": "' + b"0" * 64 + b'", "phrases": ["a"], "rle_order": "diagonal"}', 422,
         "invalid_request"),
        (b"\xff\xfe{}", 400, "bad_json"),
    ],
)  # fmt: skip
def test_hostile_segment_bodies_are_4xx(
    http: httpx.Client, body: bytes, status: int, code: str
) -> None:
    response = http.post("/v1/segment", content=body, headers={"Content-Type": "application/json"})
    assert_json_error(response, status, code)


_json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
_segment_fields = st.fixed_dictionaries(
    {},
    optional={
        "image_id": st.sampled_from(["0" * 64, "a" * 64, "../x", ""]) | st.text(max_size=70),
        "image_base64": st.text(max_size=40)
        | st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()),
        "phrases": st.lists(st.text(max_size=250), max_size=40) | _json_values,
        "score_threshold": st.floats() | st.integers() | _json_values,
        "rle_order": st.sampled_from(["coco", "rows", "x"]) | _json_values,
        "extra": _json_values,
    },
)


@pytest.fixture(scope="module")
def hostile_client() -> Iterator[TestClient]:
    segmenter = FakeSegmenter(
        {"a": Detections.from_masks(np.ones((1, 8, 8), bool), [0.9])}, max_words=3
    )
    app = create_app(segmenter, limits=ServiceLimits(max_upload_bytes=4096, max_pixels=10_000))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _assert_clean_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body["error"], str) and "\n" not in body["error"]
        assert "Traceback" not in response.text


@given(body=_segment_fields)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_json_segment_body_is_answered_below_500(
    hostile_client: TestClient, body: dict[str, Any]
) -> None:
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    response = hostile_client.post(
        "/v1/segment", content=raw, headers={"Content-Type": "application/json"}
    )
    _assert_clean_answer(response)


@given(
    body=st.binary(max_size=300),
    content_type=st.sampled_from(
        ["application/json", "image/png", "application/x-sam3-rgb8", "", "text/plain"]
    ),
    query=st.dictionaries(st.sampled_from(["height", "width", "x"]), st.text(max_size=6)),
    path=st.sampled_from(["/v1/segment", "/v1/images"]),
)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_bytes_to_any_endpoint_are_answered_below_500(
    hostile_client: TestClient, body: bytes, content_type: str, query: dict[str, str], path: str
) -> None:
    response = hostile_client.post(
        path, content=body, params=query, headers={"Content-Type": content_type}
    )
    _assert_clean_answer(response)


def test_decodes_run_at_most_n_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import sam3_agent.apps.service.app as service_app

    active: list[int] = [0]
    peak: list[int] = [0]
    lock = threading.Lock()
    original = service_app.decode_and_id

    def slow_decode(
        data: bytes, raw: tuple[int, int] | None, max_pixels: int
    ) -> tuple[str, np.ndarray]:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        try:
            return original(data, raw, max_pixels)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(service_app, "decode_and_id", slow_decode)
    app = create_app(FakeSegmenter(), limits=ServiceLimits(max_concurrent_decodes=2))
    with running(app) as base:

        def upload(seed: int) -> None:
            httpx.post(f"{base}/v1/images", content=png_bytes(make_image(seed, 20, 20)))

        threads = [threading.Thread(target=upload, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert peak[0] == 2


def test_client_reads_the_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(401, json={"error": "nope", "code": "unauthorized"})

    monkeypatch.setenv("SAM3_AGENT_TOKEN", "from-env")
    remote = RemoteSegmenter("http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    with pytest.raises(SegmenterError, match="SAM3_AGENT_TOKEN") as caught:
        remote.embed(make_image(30))
    assert seen == ["Bearer from-env"]
    assert "--token" not in str(caught.value).replace("--sam3-token", "")
    explicit = RemoteSegmenter(
        "http://127.0.0.1:9", "given", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(SegmenterError):
        explicit.embed(make_image(30))
    assert seen[-1] == "Bearer given"


def test_api_segment_passes_the_service_token(
    monkeypatch: pytest.MonkeyPatch, three_cats: Detections, image: np.ndarray
) -> None:
    import sam3_agent
    from sam3_agent.backends.spec import BackendSpec
    from tests.support.fakes import ScriptedChatModel, tool

    asked: dict[str, object] = {}

    def fake_segmenter(self: BackendSpec) -> FakeSegmenter:
        asked.update(token=self.sam3_token)
        return FakeSegmenter({"cat": three_cats})

    monkeypatch.setattr(BackendSpec, "build_segmenter", fake_segmenter)
    monkeypatch.setattr(
        BackendSpec,
        "build_chat_model",
        lambda self: ScriptedChatModel(replies=[tool("report_no_mask")]),
    )
    result = sam3_agent.segment(
        image, "a cat", sam3_url="http://127.0.0.1:8100", sam3_token="tok", llm_url="http://x/v1",
        llm_model="m",
    )  # fmt: skip
    assert result.status == "no_mask" and asked["token"] == "tok"


def test_cli_bounds_the_decodes_and_the_store(
    cli: typer.Typer,
    tiny_sam3_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    captured_serve: list[dict[str, Any]],
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["serve-sam3", "--model", str(tiny_sam3_dir), "--device", "cpu"]
    args += ["--store-images", "5", "--store-mb", "100", "--max-concurrent-decodes", "3"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (call,) = captured_serve
    assert call["max_stored_images"] == 5
    assert call["max_stored_bytes"] == 100 * 1024 * 1024
    assert call["max_concurrent_decodes"] == 3
    bad = CliRunner().invoke(cli, [*args[:4], "--max-concurrent-decodes", "0"])
    assert bad.exit_code == 2 and len(captured_serve) == 1  # refused before serving


def test_the_docs_never_put_the_service_token_on_a_command_line() -> None:
    docs = documentation_text()
    commands = [line for line in docs.splitlines() if line.lstrip().startswith("sam3-agent ")]
    assert any("serve-sam3" in line for line in commands)
    assert not [line for line in commands if "--token" in line or "--sam3-token" in line]
    assert "SAM3_AGENT_TOKEN" in docs


def test_any_client_side_http_failure_is_a_segmenter_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", lambda s: None)

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.DecodingError("bad gzip", request=request)

    remote = RemoteSegmenter("http://127.0.0.1:9", "t", transport=httpx.MockTransport(handler))
    with pytest.raises(SegmenterError, match="DecodingError") as caught:
        remote.embed(make_image(31))
    assert "\n" not in str(caught.value)


def test_the_service_never_fetches_a_url_for_a_client(http: httpx.Client) -> None:
    from tests.support.media_server import Route, media_server

    with media_server() as server:
        server.routes["/cat.png"] = Route(png_bytes(make_image(3)))
        url = server.url("/cat.png")
        for body in (
            {"image_url": url, "phrases": ["a cat"]},
            {"image_base64": url, "phrases": ["a cat"]},
            {"image_id": url, "phrases": ["a cat"]},
        ):
            response = http.post("/v1/segment", json=body)
            assert 400 <= response.status_code < 500, response.text
            assert "Traceback" not in response.text
        assert http.post("/v1/images", content=url.encode()).status_code >= 400
        assert server.paths == []
