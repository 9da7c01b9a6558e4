"""Concurrent vs one-after-another mask checks, measured side by side in one run.

The chat model answers every request after a fixed latency (200 ms by default), like a
remote endpoint; SAM 3 is replaced by a segmenter that returns N fixed masks on a real
photo. Both runs go through the real agent; only ``check_concurrency`` differs.

    python scripts/bench_examine.py [--masks 8] [--latency 0.2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from skimage import data

from sam3_agent.agent import Sam3Agent
from sam3_agent.config import AgentConfig
from sam3_agent.detections import Detections
from sam3_agent.messages import ChatMessage, ChatResponse, TokenUsage, ToolSpec


def _call(name: str, **parameters: object) -> str:
    return "<tool>" + json.dumps({"name": name, "parameters": parameters}) + "</tool>"


@dataclass
class LatencyChatModel:
    """Waits ``latency_s`` per request, then follows a fixed plan; checks always accept."""

    latency_s: float
    name: str = "latency-model"

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        await asyncio.sleep(self.latency_s)
        usage = TokenUsage(1000, 20, 1)
        if "<verdict>" in messages[0].joined_text:
            return ChatResponse("<verdict>Accept</verdict>", usage)
        rounds_done = (len(messages) - 2) // 2
        if rounds_done == 0:
            return ChatResponse(_call("segment_phrase", text_prompt="thing"), usage)
        if "examine_each_mask checked" not in messages[-1].joined_text:
            return ChatResponse(_call("examine_each_mask"), usage)
        return ChatResponse(_call("select_masks_and_return", final_answer_masks=[1]), usage)


@dataclass
class FixedMasks:
    detections: Detections

    @property
    def image_size(self) -> tuple[int, int]:
        return self.detections.image_size

    def embed(self, image: np.ndarray) -> FixedMasks:
        return self

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        return [self.detections for _ in phrases]


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
    args = parser.parse_args()

    image = data.astronaut()
    segmenter = FixedMasks(grid_masks(image, args.masks))
    chat = LatencyChatModel(args.latency)
    times = {}
    for label, concurrency in (("concurrent", args.concurrency), ("sequential", 1)):
        agent = Sam3Agent(segmenter, chat, AgentConfig(check_concurrency=concurrency))
        times[label] = statistics.median(
            checks_wall_time(agent, image) for _ in range(args.repeats)
        )
    ratio = times["concurrent"] / times["sequential"]
    print(
        f"examine_each_mask, {args.masks} masks, {args.latency * 1000:.0f} ms per call: "
        f"concurrent (pool {args.concurrency}) {times['concurrent']:.2f} s, "
        f"sequential {times['sequential']:.2f} s, ratio {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
