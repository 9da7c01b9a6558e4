"""Concurrent vs one-after-another mask checks, measured side by side in one run.

The chat model answers every request after a fixed latency (200 ms by default), like a
remote endpoint; SAM 3 is replaced by a segmenter that returns N fixed masks on a real
photo. Both runs go through the real agent; only ``check_concurrency`` differs.

With ``--http`` the latency comes from a scripted OpenAI-compatible server on 127.0.0.1
(``tests/support/openai_server.py``) and the agent talks to it through ``OpenAIChatModel``, so the
figure includes the real HTTP client, JSON and base64 image payloads.

    python -m scripts.bench examine [--masks 8] [--latency 0.2] [--repeats 3] [--http]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np
from skimage import data

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.base import ChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from tests.support.fakes import FakeSegmenter, ScriptedChatModel


def _call(name: str, **parameters: object) -> str:
    return "<tool>" + json.dumps({"name": name, "parameters": parameters}) + "</tool>"


def planned_reply(system_text: str, n_messages: int, last_text: str) -> str:
    """The fixed plan: segment, examine, select mask 1; every check accepts."""
    if "<verdict>" in system_text:
        return "<verdict>Accept</verdict>"
    rounds_done = (n_messages - 2) // 2
    if rounds_done == 0:
        return _call("segment_phrase", text_prompt="thing")
    if "examine_each_mask checked" not in last_text:
        return _call("examine_each_mask")
    return _call("select_masks_and_return", final_answer_masks=[1])


def scripted_chat_model(latency_s: float) -> ScriptedChatModel:
    """The plan of :func:`planned_reply` in process, waiting ``latency_s`` per request."""
    return ScriptedChatModel(
        replies=[
            _call("segment_phrase", text_prompt="thing"),
            _call("examine_each_mask"),
            _call("select_masks_and_return", final_answer_masks=[1]),
        ],
        default_verdict="<verdict>Accept</verdict>",
        delay_s=latency_s,
        prompt_tokens=1000,
        completion_tokens=20,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


@contextlib.contextmanager
def http_chat_model(latency_s: float) -> Iterator[ChatModel]:
    """OpenAIChatModel against the scripted test server on 127.0.0.1 (``latency_s`` per call)."""
    from tests.support.openai_server import Reply, ScriptedServer, serve

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        text = planned_reply(
            _text(messages[0]["content"]), len(messages), _text(messages[-1]["content"])
        )
        return Reply(text=text, usage=(1000, 20))

    with serve(ScriptedServer(responder=respond, latency_s=latency_s)) as server:
        yield OpenAIChatModel("bench-vlm", base_url=server.base_url, api_key="bench")


def grid_masks(image: np.ndarray, n: int) -> Detections:
    """``n`` disjoint rectangles on a grid, scores descending."""
    h, w = image.shape[:2]
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    masks = np.zeros((n, h, w), dtype=bool)
    for i in range(n):
        r, c = divmod(i, cols)
        y0, x0 = r * h // rows, c * w // cols
        masks[i, y0 + 5 : y0 + h // rows - 5, x0 + 5 : x0 + w // cols - 5] = True
    return Detections.from_masks(masks, np.linspace(0.95, 0.6, n))


def checks_wall_time(agent: Sam3Agent, image: np.ndarray) -> float:
    result = agent.run(image, "every thing")
    if result.status != "masks":
        raise RuntimeError(f"benchmark session did not finish: {result.failure}")
    return result.timings["checks"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--masks", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per MLLM call")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--http",
        action="store_true",
        help="serve the latency from a local OpenAI-compatible server and use OpenAIChatModel",
    )
    args = parser.parse_args()

    image = data.astronaut()
    segmenter = FakeSegmenter(default=grid_masks(image, args.masks))
    times = {}
    with contextlib.ExitStack() as stack:
        served = stack.enter_context(http_chat_model(args.latency)) if args.http else None

        def session_time(concurrency: int) -> float:
            chat: ChatModel = served or scripted_chat_model(args.latency)
            agent = Sam3Agent(segmenter, chat, AgentConfig(check_concurrency=concurrency))
            return checks_wall_time(agent, image)

        for label, concurrency in (("concurrent", args.concurrency), ("sequential", 1)):
            times[label] = statistics.median(session_time(concurrency) for _ in range(args.repeats))
    ratio = times["concurrent"] / times["sequential"]
    print(
        f"examine_each_mask{' over HTTP' if args.http else ''}, {args.masks} masks, "
        f"{args.latency * 1000:.0f} ms per call: "
        f"concurrent (pool {args.concurrency}) {times['concurrent']:.2f} s, "
        f"sequential {times['sequential']:.2f} s, ratio {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
