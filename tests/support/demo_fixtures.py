"""What the demo's app and browser tests share: a scripted coffee session, the app served on
127.0.0.1 in a thread, and a way to wait on a condition without fixed sleeps.

The session is scripted, not segmented: the fake segmenter answers the phrase ``coffee``
with two hand-drawn ellipses on ``assets/coffee.jpg`` (the coffee, scored 0.91, and the
spoon, 0.62), and the scripted MLLM server segments, examines (the checker accepts mask 1
and rejects mask 2) and selects mask 1.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.apps.demo.sessions import DemoRunner
from sam3_agent.backends.chat_models import build_chat_model
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import RGBImage
from tests.support.fakes import FakeSegmenter
from tests.support.openai_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
COFFEE = REPO / "assets" / "coffee.jpg"
QUERY = "the coffee in the cup"
MASK_NUMBER = re.compile(r"mask (\d+) of (\d+)")


def ellipse(h: int, w: int, cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    """A filled ellipse; centre and radii as fractions of the width (x) and height (y)."""
    yy, xx = np.mgrid[0:h, 0:w]
    return ((xx - cx * w) / (rx * w)) ** 2 + ((yy - cy * h) / (ry * h)) ** 2 <= 1.0


def coffee_detections(image: RGBImage) -> Detections:
    h, w = image.shape[:2]
    coffee = ellipse(h, w, 0.48, 0.36, 0.135, 0.12)
    spoon = ellipse(h, w, 0.61, 0.70, 0.065, 0.11)
    return Detections.from_masks(np.stack([coffee, spoon]), [0.91, 0.62])


def coffee_segmenter() -> FakeSegmenter:
    return FakeSegmenter({"coffee": coffee_detections})


def _call(name: str, **parameters: Any) -> str:
    return "<tool>" + json.dumps({"name": name, "parameters": parameters}) + "</tool>"


MAIN_REPLIES = [
    Reply(
        text="<think>The request is about the drink itself, not the cup: SAM 3 should look "
        "for coffee.</think>\n" + _call("segment_phrase", text_prompt="coffee"),
        usage=(1410, 48),
    ),
    Reply(
        text="<think>Two candidates; the second one may be the spoon. Check each.</think>\n"
        + _call("examine_each_mask"),
        usage=(1520, 31),
    ),
    Reply(
        text="<think>Only mask 1 survived and it covers the coffee.</think>\n"
        + _call("select_masks_and_return", final_answer_masks=[1]),
        usage=(1490, 36),
    ),
]


def is_check(body: dict[str, Any]) -> bool:
    system = body["messages"][0]["content"]
    return isinstance(system, str) and "<verdict>" in system


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


class CoffeeScript:
    """Answers the main conversation from ``main`` and each check by its mask number.

    ``hold`` (a round number) makes that main round hang until the server stops, so a test
    can stop the session while it waits for the model. ``by_round`` answers each main call
    with ``main[k]``, k the number of assistant turns in its conversation, instead of
    popping a queue: sessions running at once then each get the whole script in order.
    """

    def __init__(
        self, main: list[Reply] | None = None, *, hold: int | None = None, by_round: bool = False
    ) -> None:
        self.main = list(MAIN_REPLIES if main is None else main)
        self.hold = hold
        self.by_round = by_round
        self.main_calls = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_check(body):
            match = MASK_NUMBER.search(user_text(body))
            number = int(match.group(1)) if match else 0
            if number == 1:
                return Reply(
                    text="<think>Dark brown liquid inside the cup.</think><verdict>Accept</verdict>"
                )
            return Reply(
                text="<think>This is the spoon, not coffee.</think><verdict>Reject</verdict>"
            )
        with self.lock:
            self.main_calls += 1
            if self.main_calls == self.hold:
                return Reply.hang(600)
            if self.by_round:
                turn = sum(m["role"] == "assistant" for m in body["messages"])
                if turn < len(self.main):
                    return self.main[turn]
                return Reply(text="script exhausted", status=500, retry_after="0")
            if not self.main:
                return Reply(text="script exhausted", status=500, retry_after="0")
            return self.main.pop(0)


def coffee_runner(
    server: ScriptedServer,
    runs_dir: Path,
    *,
    segmenter: FakeSegmenter | None = None,
    config: AgentConfig | None = None,
) -> DemoRunner:
    """A runner whose agent talks to ``server`` through the real OpenAI-compatible client."""
    chat = build_chat_model(url=server.base_url, model="scripted-vlm", api_key="sk-test")
    agent = Sam3Agent(segmenter or coffee_segmenter(), chat, config or AgentConfig(max_rounds=6))
    return DemoRunner(agent, runs_dir)


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on 127.0.0.1 (a free port) in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="demo-server", daemon=True
    )
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), what="the demo server start")
        if not server.started:
            raise RuntimeError("the demo server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def wait_for(condition: Callable[[], object], *, what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` until it holds. The timeout only bounds a hung test: it is a
    failure, never the thing a test measures."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)
