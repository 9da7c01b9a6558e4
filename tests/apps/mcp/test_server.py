"""``sam3-agent mcp`` driven with the real ``mcp`` client, over stdio and over streamable HTTP
(with a token), on the tiny random SAM 3 video model and the scripted MLLM; one server per
transport runs the whole scenario of :func:`tests.support.mcp_server.exercise`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import numpy as np
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from PIL import Image

from tests.support.clips import write_mp4
from tests.support.mcp_server import (
    REPO,
    exercise,
    http_server,
    mcp_respond,
    server_command,
    server_env,
)
from tests.support.media_server import MediaServer, Route, media_server
from tests.support.openai_server import ScriptedServer, serve

pytestmark = pytest.mark.slow
TOKEN = "test-token"


@pytest.fixture(scope="module")
def mllm() -> Iterator[ScriptedServer]:
    with serve(ScriptedServer(responder=mcp_respond)) as server:
        yield server


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    image = folder / "square.png"
    pixels = np.random.default_rng(0).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(image)
    return image, write_mp4(folder / "clip.mp4", 4)


@pytest.fixture(scope="module")
def media(inputs: tuple[Path, Path]) -> Iterator[MediaServer]:
    with media_server() as server:
        server.routes["/photo.png"] = Route(inputs[0].read_bytes())
        yield server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_over_stdio(
    tiny_sam3_video_dir: Path, mllm: ScriptedServer, media: MediaServer,
    inputs: tuple[Path, Path], tmp_path: Path,
) -> None:  # fmt: skip
    command = server_command(tiny_sam3_video_dir, mllm, tmp_path / "runs")
    parameters = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(), cwd=REPO
    )
    async with Client(parameters) as client:
        await exercise(client, inputs[0], media.url("/photo.png"), inputs[1])


@pytest.fixture(scope="module")
def http_url(
    tiny_sam3_video_dir: Path, mllm: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    port = free_port()
    runs = tmp_path_factory.mktemp("http_runs")
    command = server_command(
        tiny_sam3_video_dir, mllm, runs, "--http", f"127.0.0.1:{port}", "--token", TOKEN
    )
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(command, url):
        yield url


async def test_over_http_with_a_token(
    http_url: str, media: MediaServer, inputs: tuple[Path, Path]
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        transport = streamable_http_client(http_url, http_client=http)
        async with Client(transport) as client:
            await exercise(client, inputs[0], media.url("/photo.png"), inputs[1])


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}"])
def test_http_without_the_token_is_401(http_url: str, authorization: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = httpx.post(http_url, json=body, headers=headers, timeout=30)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
