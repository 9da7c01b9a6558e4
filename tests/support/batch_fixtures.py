"""Batch inputs and an MLLM for the test server that answers any batch request.

The MLLM is stateless (a function of the request body), so any number of workers, engines
and processes can share one :class:`openai_server.ScriptedServer`: it segments the query
as the phrase, then selects mask 1, or reports no mask when SAM 3 found none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from tests.support.openai_server import Reply

QUERIES = ("red block", "blue stripe")
IMAGES = ("one.png", "two.png", "three.png")


def tool_text(name: str, **params: object) -> str:
    return f"<think>ok</think><tool>{json.dumps({'name': name, 'parameters': params})}</tool>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def respond(body: dict[str, Any]) -> Reply:
    """The MLLM's turn for a batch request (see the module docstring)."""
    messages = body["messages"]
    if "<verdict>" in _text(messages[0].get("content", "")):
        return Reply(text="<verdict>Accept</verdict>")
    if not any(m["role"] == "assistant" for m in messages):
        first_user = _text(messages[1].get("content", ""))
        phrase = next((q for q in QUERIES if q in first_user), "thing")
        return Reply(text=tool_text("segment_phrase", text_prompt=phrase))
    last = _text(messages[-1].get("content", ""))
    if "found no masks" in last:
        return Reply(text=tool_text("report_no_mask"))
    return Reply(text=tool_text("select_masks_and_return", final_answer_masks=[1]))


def write_images(folder: Path) -> list[Path]:
    """Three small distinct RGB images."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    rng = np.random.default_rng(7)
    for i, name in enumerate(IMAGES):
        pixels = (rng.random((48 + 8 * i, 64, 3)) * 255).astype(np.uint8)
        path = folder / name
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return paths


def write_jsonl(folder: Path) -> Path:
    """``requests.jsonl``: every image with every query (6 requests), relative paths."""
    write_images(folder / "images")
    lines = [
        json.dumps({"image": f"images/{name}", "query": query})
        for name in IMAGES
        for query in QUERIES
    ]
    path = folder / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path
