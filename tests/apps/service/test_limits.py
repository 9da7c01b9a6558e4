"""The service under many clients: bodies are read only inside a slot, work in flight is
bounded, and past the bounds the answer is 503 with ``Retry-After`` (issue 17).

Requests go through ``httpx.ASGITransport``, which hands the app each body chunk only when
the app asks for it, so a body generator that has started is a body the app is reading.
No wall-clock figure is asserted: waits are on events and the gates' own counters.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.apps.service import server as service_server
from sam3_agent.apps.service.app import create_app
from sam3_agent.apps.service.limits import ServiceLimits
from sam3_agent.backends.sam3_remote import RemoteSegmenter
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import RGBImage
from tests.support.fakes import FakeSegmenter

HANG_GUARD_S = 60.0  # only a hung test fails on it; no assertion depends on time


def png(seed: int, size: int = 24) -> bytes:
    image = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".png", image)
    assert ok
    return buf.tobytes()


async def until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


@dataclass
class Bodies:
    """Request bodies that stop after their first chunk until ``release`` is set, counting
    how many the app is reading at once."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    reading: int = 0
    peak: int = 0
    started: int = 0

    async def body(self, data: bytes) -> AsyncIterator[bytes]:
        self.started += 1
        self.reading += 1
        self.peak = max(self.peak, self.reading)
        try:
            yield data[:16]
            await self.release.wait()
            yield data[16:]
        finally:
            self.reading -= 1


class BlockingSegmenter(FakeSegmenter):
    """A fake whose ``segment`` waits for ``release`` (a thread event), counting calls at work."""

    def __init__(self) -> None:
        super().__init__(default=None)
        self.release = threading.Event()
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    def embed(self, image: RGBImage):  # type: ignore[no-untyped-def]
        embedding = super().embed(image)
        inner = embedding.segment

        def segment(phrases: Sequence[str], score_threshold: float) -> list[Detections]:
            with self._lock:
                self.active += 1
                self.peak = max(self.peak, self.active)
            try:
                assert self.release.wait(HANG_GUARD_S)
                return inner(phrases, score_threshold)
            finally:
                with self._lock:
                    self.active -= 1

        embedding.segment = segment  # type: ignore[method-assign]
        return embedding


def run(app: FastAPI, scenario: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            await scenario(client)

    asyncio.run(main())


def assert_busy(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["code"] == "busy"


def test_uploads_read_no_more_than_n_bodies_at_once_and_503_past_the_line() -> None:
    app = create_app(FakeSegmenter(), limits=ServiceLimits(max_concurrent_uploads=2, max_waiting=1))
    bodies = Bodies()
    answers: list[httpx.Response] = []

    async def scenario(client: httpx.AsyncClient) -> None:
        async def upload(seed: int) -> None:
            response = await client.post(
                "/v1/images", content=bodies.body(png(seed)), headers={"Content-Type": "image/png"}
            )
            answers.append(response)

        tasks = [asyncio.create_task(upload(seed)) for seed in range(6)]
        # Two read their bodies, one waits without reading, three are refused at once.
        await until(lambda: len(answers) == 3 and app.state.uploads.waiting == 1)
        assert bodies.started == 2 and bodies.reading == 2
        for response in answers:
            assert_busy(response)
        bodies.release.set()
        await asyncio.gather(*tasks)

    run(app, scenario)
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 503, 503, 503]
    assert bodies.peak == 2 and app.state.uploads.peak == 2
    assert len(app.state.images) == 3


def test_a_declared_oversize_body_is_refused_before_it_waits_for_a_slot() -> None:
    app = create_app(
        FakeSegmenter(), limits=ServiceLimits(max_upload_bytes=4000, max_concurrent_uploads=1)
    )
    bodies = Bodies()

    async def scenario(client: httpx.AsyncClient) -> None:
        blocked = asyncio.create_task(
            client.post(
                "/v1/images", content=bodies.body(png(1)), headers={"Content-Type": "image/png"}
            )
        )
        await until(lambda: app.state.uploads.held == 1)
        response = await client.post("/v1/images", content=b"x" * 9000)
        assert response.status_code == 413 and response.json()["code"] == "too_large"
        big_json = await client.post(
            "/v1/segment", content=b"{" + b" " * 80_000 + b"}",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        assert big_json.status_code == 413
        assert app.state.uploads.waiting == 0 and app.state.segments.held == 0
        bodies.release.set()
        assert (await blocked).status_code == 200

    run(app, scenario)


def test_segment_work_in_flight_is_bounded() -> None:
    segmenter = BlockingSegmenter()
    app = create_app(segmenter, limits=ServiceLimits(max_concurrent_segments=2, max_waiting=1))
    answers: list[httpx.Response] = []

    async def scenario(client: httpx.AsyncClient) -> None:
        uploaded = await client.post("/v1/images", content=png(3))
        image_id = uploaded.json()["image_id"]

        async def segment() -> None:
            body = {"image_id": image_id, "phrases": ["a cat"]}
            answers.append(await client.post("/v1/segment", json=body))

        tasks = [asyncio.create_task(segment()) for _ in range(5)]
        await until(lambda: len(answers) == 2 and app.state.segments.waiting == 1)
        await until(lambda: segmenter.active == 2)
        for response in answers:
            assert_busy(response)
        segmenter.release.set()
        await asyncio.gather(*tasks)

    run(app, scenario)
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 503, 503]
    assert segmenter.peak == 2 and app.state.segments.peak == 2


def test_an_inline_image_holds_an_upload_slot_while_it_is_segmented() -> None:
    segmenter = BlockingSegmenter()
    app = create_app(segmenter, limits=ServiceLimits(max_concurrent_uploads=1, max_waiting=0))

    async def scenario(client: httpx.AsyncClient) -> None:
        body = {"image_base64": base64.b64encode(png(4)).decode(), "phrases": ["a cat"]}
        inline = asyncio.create_task(client.post("/v1/segment", json=body))
        await until(lambda: segmenter.active == 1)
        assert app.state.uploads.held == 1
        refused = await client.post("/v1/images", content=png(5))
        assert_busy(refused)
        segmenter.release.set()
        assert (await inline).status_code == 200
        assert (await client.post("/v1/images", content=png(5))).status_code == 200

    run(app, scenario)


@pytest.mark.parametrize(
    "limits",
    [
        {"max_concurrent_uploads": 0},
        {"max_concurrent_segments": 0},
        {"max_waiting": -1},
    ],
)
def test_limits_are_checked(limits: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        create_app(FakeSegmenter(), limits=ServiceLimits(**limits))


_LIMIT_NAMES = [f.name for f in dataclasses.fields(ServiceLimits)]


@given(name=st.sampled_from(_LIMIT_NAMES), offset=st.integers(0, 2**40), data=st.data())
def test_a_limit_below_its_least_is_refused_naming_it(
    name: str, offset: int, data: st.DataObject
) -> None:
    least = 0 if name == "max_waiting" else 1  # no line to wait in is a bound; no slot is not
    assert getattr(ServiceLimits(**{name: least + offset}), name) == least + offset
    bad = data.draw(st.integers(-(2**40), least - 1))
    with pytest.raises(UserError) as refused:
        ServiceLimits(**{name: bad})
    assert str(refused.value) == f"{name} must be >= {least}, got {bad}"


def test_the_app_and_the_server_take_the_limits_as_one_value() -> None:
    for function in (create_app, service_server.serve):
        parameters = inspect.signature(function).parameters
        assert parameters["limits"].default == ServiceLimits()
        assert not set(parameters) & set(_LIMIT_NAMES), function.__name__


def test_client_waits_as_long_as_a_busy_service_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", slept.append)
    answers = iter(
        [
            httpx.Response(503, json={"error": "busy", "code": "busy"}, headers={"Retry-After": "7"}),
            httpx.Response(503, json={"error": "busy", "code": "busy"}, headers={"Retry-After": "x"}),
            httpx.Response(503, json={"error": "busy", "code": "busy"}, headers={"Retry-After": "1e9"}),
            httpx.Response(200, json={"image_id": "0" * 64, "image_size": [4, 4]}),
        ]
    )  # fmt: skip
    remote = RemoteSegmenter(
        "http://127.0.0.1:9",
        "t",
        retries=3,
        backoff_s=0.5,
        transport=httpx.MockTransport(lambda request: next(answers)),
    )
    remote.embed(np.zeros((4, 4, 3), np.uint8))
    assert slept == [7.0, 1.0, 60.0]  # its Retry-After, our backoff when unreadable, the cap
