"""A remote SAM 3 is checked (health and token) before the first chat-model request is paid
for (issue 17: a wrong token was discovered only after the first MLLM call)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.apps.service.app import create_app
from sam3_agent.backends.base import preflight
from sam3_agent.backends.sam3_remote import RemoteSegmenter
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.values.errors import SegmenterError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

TOKEN = "right-token"
IMAGE = np.zeros((16, 16, 3), np.uint8)


@pytest.fixture
def service() -> Iterator[tuple[httpx.MockTransport, list[str]]]:
    """The service app with a token, reached through a transport that records each path."""
    paths: list[str] = []
    with TestClient(create_app(FakeSegmenter(), token=TOKEN)) as client:

        def forward(request: httpx.Request) -> httpx.Response:
            paths.append(f"{request.method} {request.url.path}")
            answer = client.request(
                request.method,
                request.url.path,
                params=request.url.params,
                content=request.content,
                headers={
                    k: v
                    for k, v in request.headers.items()
                    if k in ("authorization", "content-type")
                },
            )
            return httpx.Response(answer.status_code, content=answer.content)

        yield httpx.MockTransport(forward), paths


def remote(transport: httpx.BaseTransport, token: str | None) -> RemoteSegmenter:
    return RemoteSegmenter("http://sam3.test", token, retries=0, transport=transport)


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_a_refused_token_fails_before_any_chat_request(
    service: tuple[httpx.MockTransport, list[str]],
    token: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAM3_AGENT_TOKEN", raising=False)
    transport, paths = service
    chat = ScriptedChatModel(replies=[tool("report_no_mask")])
    agent = Sam3Agent(remote(transport, token), chat)
    with pytest.raises(SegmenterError, match="refused the token"):
        agent.run(IMAGE, "the cat")
    assert chat.calls == []
    assert paths == ["GET /health", "GET /v1/health"]


def test_the_right_token_is_checked_once(service: tuple[httpx.MockTransport, list[str]]) -> None:
    transport, paths = service
    segmenter = remote(transport, TOKEN)
    agent = Sam3Agent(segmenter, ScriptedChatModel(replies=[tool("report_no_mask")] * 2))
    assert agent.run(IMAGE, "the cat").status == "no_mask"
    assert agent.run(IMAGE, "the dog").status == "no_mask"
    assert paths.count("GET /health") == 1 and paths.count("GET /v1/health") == 1


def test_an_unreachable_service_fails_before_any_chat_request() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    chat = ScriptedChatModel(replies=[tool("report_no_mask")])
    agent = Sam3Agent(remote(httpx.MockTransport(refuse), TOKEN), chat)
    with pytest.raises(SegmenterError, match="ConnectError"):
        agent.run(IMAGE, "the cat")
    assert chat.calls == []


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="<html>a web page</html>"),
        httpx.Response(404, text="not here"),
        httpx.Response(200, json={"status": "degraded"}),
    ],
)
def test_something_else_at_the_url_is_named(answer: httpx.Response) -> None:
    segmenter = remote(httpx.MockTransport(lambda request: answer), TOKEN)
    with pytest.raises(SegmenterError, match=r"SAM 3 service|unexpected answer"):
        segmenter.check()


def test_a_service_without_v1_health_passes_on_its_health() -> None:
    def older(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(404, json={"error": "Not Found", "code": "not_found"})

    remote(httpx.MockTransport(older), TOKEN).check()


def test_wrappers_forward_the_check_and_plain_segmenters_need_none(
    service: tuple[httpx.MockTransport, list[str]],
) -> None:
    transport, _ = service
    with pytest.raises(SegmenterError, match="refused the token"):
        preflight(SharedEmbeddings(remote(transport, "wrong-token")))
    preflight(FakeSegmenter())  # no check(): taken as ready
    preflight(SharedEmbeddings(FakeSegmenter()))
