"""For CLI tests of the video commands (``track``, ``batch`` with video rows): the test
MLLM server scripted to pick the square, and the flags that run the tiny random SAM 3 video
model from disk on the CPU with it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.openai_server import Reply, ScriptedServer, serve


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if isinstance(p, dict))


def respond(body: dict[str, Any]) -> Reply:
    """Any session, image or video: segment "square", then select 1 (or report no mask);
    every mask check accepts."""
    messages = body["messages"]
    if "<verdict>" in _text(messages[0]["content"]):
        return Reply("<verdict>Accept</verdict>")
    last = _text(messages[-1]["content"])
    if "found no tracks" in last or "found no masks" in last:
        call: dict[str, Any] = {"name": "report_no_mask", "parameters": {}}
    elif any(m["role"] == "assistant" for m in messages):
        call = {"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}
    else:
        call = {"name": "segment_phrase", "parameters": {"text_prompt": "square"}}
    return Reply(f"<think>ok</think><tool>{json.dumps(call)}</tool>")


@contextmanager
def square_picker() -> Iterator[ScriptedServer]:
    """The test MLLM server answering with :func:`respond`."""
    with serve(ScriptedServer(responder=respond)) as server:
        yield server


def tiny_video_flags(sam3_dir: Path, mllm: ScriptedServer) -> list[str]:
    """The flags that run ``sam3_dir`` (the tiny random SAM 3) on the CPU with ``mllm``."""
    return [
        "--sam3", str(sam3_dir), "--device", "cpu", "--dtype", "float32",
        "--llm-url", mllm.base_url, "--llm-model", "test-vlm", "--llm-api-key", "k",
        "--score-threshold", "0.0",
    ]  # fmt: skip
