"""``sam3-agent run`` end to end against the scripted OpenAI-compatible server on 127.0.0.1.

The real CLI, agent and OpenAIChatModel; SAM 3 is the fake segmenter from ``fakes``. The
server answers the main conversation from a script (tag protocol) and each mask check
by the mask number in its prompt, so the checks can arrive in any order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.detections import Detections
from sam3_agent.values.rle import decode_rle
from tests.support.fakes import FakeSegmenter, square_mask, tool
from tests.support.openai_server import RecordedRequest, Rendezvous, Reply, ScriptedServer, serve

H, W = 120, 160
MASK_NUMBER = re.compile(r"mask (\d+) of (\d+)")


def eight_cats() -> Detections:
    """Eight separate squares in two rows, scored 0.95 down to 0.60 (so numbered 1..8)."""
    masks = np.stack(
        [square_mask(H, W, 10 + 60 * (i // 4), 10 + 38 * (i % 4), 30) for i in range(8)]
    )
    return Detections.from_masks(masks, [0.95 - 0.05 * i for i in range(8)])


def is_check(body: dict[str, Any]) -> bool:
    system = body["messages"][0]["content"]
    return isinstance(system, str) and "<verdict>" in system


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


class Script:
    """Main-conversation replies in order; checks accept odd mask numbers, after a delay."""

    def __init__(self, main: list[Reply]) -> None:
        self.main = list(main)

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_check(body):
            match = MASK_NUMBER.search(user_text(body))
            number = int(match.group(1)) if match else 0
            verdict = "Accept" if number % 2 else "Reject"
            return Reply(text=f"<think>Mask {number}.</think><verdict>{verdict}</verdict>")
        if not self.main:
            return Reply(text="script exhausted", status=500)
        return self.main.pop(0)


# A 500 that asks for no wait, so the retry policy runs without slowing the test down.
FAST_500 = Reply(status=500, retry_after="0")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        yield state


@pytest.fixture
def segmenter(monkeypatch: pytest.MonkeyPatch) -> FakeSegmenter:
    fake = FakeSegmenter({"cat": eight_cats()})
    monkeypatch.setattr(BackendSpec, "build_segmenter", lambda self: fake)
    # The fake SAM 3 needs no memory: the check must not depend on this machine's.
    monkeypatch.setattr(
        memory, "read_memory", lambda device: memory.MemoryReading("cpu", 1 << 50, 1 << 50)
    )
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return fake


@pytest.fixture
def image_path(tmp_path: Path) -> Path:
    path = tmp_path / "cats.png"
    pixels = np.random.default_rng(0).integers(0, 255, (H, W, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def run_cli(server: ScriptedServer, image: Path, out: Path, *extra: str) -> Any:
    args = ["run", str(image), "the cat at the top left", "--out", str(out)]
    args += ["--llm-url", server.base_url, "--llm-model", "test-vlm", "--llm-api-key", "sk-t"]
    return CliRunner().invoke(app, [*args, *extra])


def checks(server: ScriptedServer) -> list[RecordedRequest]:
    return [r for r in server.completions if is_check(r.body)]


def test_run_end_to_end_with_retries_and_concurrent_checks(
    server: ScriptedServer, segmenter: FakeSegmenter, image_path: Path, tmp_path: Path
):
    server.responder = Script(
        [
            FAST_500,
            FAST_500,
            Reply(text=tool("segment_phrase", text_prompt="cat"), usage=(1000, 20)),
            Reply(text=tool("examine_each_mask"), usage=(1500, 15)),
            Reply(text=tool("select_masks_and_return", final_answer_masks=[1]), usage=(900, 9)),
        ]
    )
    # The checks are answered only once all eight are in flight at the same time.
    server.rendezvous = Rendezvous(8, admits=is_check)
    out = tmp_path / "out"
    result = run_cli(server, image_path, out)
    assert result.exit_code == 0, result.output

    document = json.loads((out / "result.json").read_text())
    assert document["status"] == "masks"
    assert document["rounds"] == 3
    assert document["model"] == "test-vlm"
    (mask,) = document["masks"]
    np.testing.assert_array_equal(decode_rle(mask["rle"]), eight_cats().masks[0])
    assert document["usage"]["main"]["prompt_tokens"] == 3400
    assert document["usage"]["checks"]["calls"] == 8
    assert (out / "overlay.png").is_file()
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records].count("main") == 3
    assert [r["kind"] for r in records].count("check") == 8

    # Two 500s were retried: 2 failed + 3 answered main requests reached the server.
    main_requests = [r for r in server.completions if not is_check(r.body)]
    assert len(main_requests) == 5
    assert segmenter.phrases == ["cat"]

    # The eight mask checks were in flight at the same time.
    assert len(checks(server)) == 8
    assert server.rendezvous.met

    # Images travel as data URLs; the raw image is the same bytes in every request.
    raw_urls = {r.body["messages"][1]["content"][0]["image_url"]["url"] for r in main_requests}
    assert len(raw_urls) == 1 and raw_urls.pop().startswith("data:image/")
    assert "tools" not in main_requests[-1].body


def test_endpoint_down_is_one_line_error(
    server: ScriptedServer, segmenter: FakeSegmenter, image_path: Path, tmp_path: Path
):
    server.default = FAST_500
    result = run_cli(server, image_path, tmp_path / "out")
    assert result.exit_code == 1
    assert "ChatModelError" in result.stderr
    assert server.base_url in result.stderr
    assert "HTTP 500" in result.stderr
    assert "Traceback" not in result.output
    assert len(server.completions) == 6  # the first attempt and five retries


def test_bad_api_key_fails_without_retry(
    server: ScriptedServer, segmenter: FakeSegmenter, image_path: Path, tmp_path: Path
):
    server.default = Reply(status=401)
    result = run_cli(server, image_path, tmp_path / "out")
    assert result.exit_code == 1
    assert "401" in result.stderr and "API key" in result.stderr
    assert len(server.completions) == 1


def test_cache_then_replay_without_the_endpoint(
    server: ScriptedServer, segmenter: FakeSegmenter, image_path: Path, tmp_path: Path
):
    server.responder = Script(
        [
            Reply(text=tool("segment_phrase", text_prompt="cat")),
            Reply(text=tool("select_masks_and_return", final_answer_masks=[2])),
        ]
    )
    cache = tmp_path / "responses.sqlite"
    first = run_cli(server, image_path, tmp_path / "first", "--cache", str(cache))
    assert first.exit_code == 0, first.output
    requests_before = len(server.completions)

    server.responder = None
    server.default = Reply(status=500)
    again = run_cli(server, image_path, tmp_path / "again", "--cache", str(cache), "--replay")
    assert again.exit_code == 0, again.output
    assert len(server.completions) == requests_before
    recorded = json.loads((tmp_path / "first" / "result.json").read_text())
    replayed = json.loads((tmp_path / "again" / "result.json").read_text())
    assert replayed["masks"] == recorded["masks"]
    assert replayed["usage"]["cached_calls"] == 2
    assert replayed["usage"]["total"]["total_tokens"] == 0


def test_replay_without_cache_is_a_usage_error(
    server: ScriptedServer, segmenter: FakeSegmenter, image_path: Path, tmp_path: Path
):
    result = run_cli(server, image_path, tmp_path / "out", "--replay")
    assert result.exit_code == 2
    assert "--cache" in result.stderr
    assert server.completions == []
