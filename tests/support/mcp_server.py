"""For the tests of ``sam3-agent mcp``: the scripted MLLM a server's sessions talk to, the
command line that starts a server on the tiny random SAM 3 (video) model, and the one
scenario both transports are driven through with the real ``mcp`` client.

The MLLM answers as :func:`tests.support.video_cli.respond` does (segment "square", select
mask 1), except by words of the query: "hold" sessions hang in their second round (the test
cancels them there), "unauthorized" ones get HTTP 401 (an MLLM error)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client

from sam3_agent.agent.loop import STOPPED
from tests.support.openai_server import Reply, ScriptedServer
from tests.support.video_cli import _text, respond, tiny_video_flags

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"segment", "track", "segment_phrase"}


def mcp_respond(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    query = _text(messages[1]["content"]) if len(messages) > 1 else ""
    if "unauthorized" in query:
        return Reply(status=401)
    if "hold" in query and any(m["role"] == "assistant" for m in messages):
        return Reply.hang(120)
    return respond(body)


def server_command(sam3_dir: Path, mllm: ScriptedServer, out: Path, *extra: str) -> list[str]:
    """``sam3-agent mcp`` on the tiny SAM 3 at ``sam3_dir`` with ``mllm``, runs under ``out``."""
    flags = tiny_video_flags(sam3_dir, mllm)
    return [sys.executable, "-m", "sam3_agent.apps.cli.main", "mcp", *flags, "--out", str(out),
            "--max-concurrent", "2", *extra]  # fmt: skip


def server_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


@contextmanager
def http_server(command: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    """The server of ``command`` (with ``--http``) running until the block ends; waits for
    ``url`` to answer (any status) first."""
    import httpx

    process = subprocess.Popen(command, env=server_env(), cwd=REPO, stderr=subprocess.PIPE)
    try:
        for _ in range(600):  # up to a minute: imports and the models on a busy machine
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode() if process.stderr else "")
            try:
                httpx.get(url, timeout=1.0)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_dir_of(result: Any) -> Path:
    return Path(result.structured_content["run_dir"])


async def exercise(client: Client, image: Path, image_url: str, clip: Path) -> None:
    """Everything each transport must carry: the tools listed; segment by path (with its
    progress), base64 and URL; track; segment_phrase; errors as one-line tool errors; a
    cancelled call's session stopped while the server keeps answering."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOLS

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    by_path = await client.call_tool(
        "segment", {"image": str(image), "query": "the square", "max_rounds": 5},
        progress_callback=on_progress,
    )  # fmt: skip
    assert not by_path.is_error, by_path.content
    answer = by_path.structured_content
    assert answer["status"] == "masks" and answer["rounds"] == 2
    (mask,) = answer["masks"]
    assert set(mask) == {"rle", "box_xyxy", "score"} and "counts" in mask["rle"]
    assert answer["tokens"]["prompt_tokens"] > 0
    assert json.loads((run_dir_of(by_path) / "result.json").read_text())["status"] == "masks"
    kinds = [c.type for c in by_path.content]
    assert kinds == ["text", "image"] and by_path.content[1].mime_type == "image/png"
    assert [(p[0], p[1]) for p in progress] == [(1, 5), (2, 5)]
    assert progress[0][2] is not None and progress[0][2].startswith("round 1: segment_phrase")

    inline = base64.b64encode(image.read_bytes()).decode()
    by_data = await client.call_tool("segment", {"image_base64": inline, "query": "the square"})
    assert by_data.structured_content["status"] == "masks", by_data.content
    assert by_data.structured_content["image"]["path"] == "(base64 data)"
    by_url = await client.call_tool("segment", {"image": image_url, "query": "the square"})
    assert by_url.structured_content["image"]["url"] == image_url, by_url.content

    phrase = await client.call_tool("segment_phrase", {"image": str(image), "phrase": "square"})
    assert phrase.structured_content["rounds"] == 0, phrase.content
    assert len(phrase.structured_content["masks"]) >= 1

    tracked = await client.call_tool("track", {"video": str(clip), "query": "the square"})
    assert not tracked.is_error, tracked.content
    summary = tracked.structured_content
    assert summary["status"] in ("masks", "no_mask") and summary["video"]["frames_used"]
    assert Path(summary["overlay"]).is_file()
    for track in summary["tracks"]:
        assert set(track) == {"track_id", "score", "frames_with_mask", "extent"}

    for arguments, said in [
        ({"image": str(image.with_name("missing.png")), "query": "q"}, "missing.png"),
        ({"image_base64": "not base64!", "query": "q"}, "not valid base64"),
        ({"image_base64": base64.b64encode(b"no image").decode(), "query": "q"}, "(base64 data)"),
        ({"image": str(image), "image_base64": inline, "query": "q"}, "exactly one of"),
        ({"image": str(image), "query": "unauthorized"}, "401"),
        ({"image": str(image), "query": "q", "max_rounds": 0}, "max_rounds"),
        ({"image": str(image), "query": "q", "max_rounds": "many"}, "max_rounds"),  # the schema's
        ({"image": str(image)}, "query"),
    ]:
        failed = await client.call_tool("segment", arguments)
        assert failed.is_error, arguments
        (line,) = failed.content
        assert said in line.text and "\n" not in line.text, line.text

    await _cancelled(client, image)


async def _cancelled(client: Client, image: Path) -> None:
    """A call cancelled in its second round: the session ends stopped, its run directory
    written; the server answers the next call."""
    first_round = anyio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        first_round.set()

    async def call() -> None:
        await client.call_tool(
            "segment", {"image": str(image), "query": "hold on"}, progress_callback=on_progress
        )

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await first_round.wait()
        group.cancel_scope.cancel()
    again = await client.call_tool("segment_phrase", {"image": str(image), "phrase": "square"})
    assert not again.is_error, again.content
    # The stopped session's run directory, beside the one of the call just answered.
    runs = Path(again.structured_content["run_dir"]).parent
    (held,) = [d for d in runs.iterdir() if "hold" in d.name]
    with anyio.fail_after(60):  # the server stops the session when the cancel arrives
        while (failure := _failure(held / "result.json")) is None:
            await anyio.sleep(0.05)
    assert failure == STOPPED


def _failure(result: Path) -> str | None:
    try:
        return json.loads(result.read_text())["failure"]
    except (OSError, ValueError):
        return None
