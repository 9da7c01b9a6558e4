"""What each tool set costs: one request answered with the paper's tools and with the
extended ones, through the real agent with a scripted MLLM, side by side in MLLM calls and
estimated prompt tokens (the agent's own estimate, as a run's ``tokens_estimate``).

The request wants all seven apples; the phrase finds seven candidates (two of them pears).
``paper``: a second, narrower phrase, then the selection. ``extended``: the same phrase again
with two apples as ``like`` and a pear as ``unlike`` exemplars, then the selection. The fake
SAM 3 answers both second searches alike, so the difference is the tools' own cost: the
longer system prompt and tool schema, and the exemplar parameters in the replies.

Usage: python -m scripts.bench tools
"""

from __future__ import annotations

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, square_mask, tool

H, W = 480, 640
SCRIPTS = {
    "paper": [
        tool("segment_phrase", text_prompt="fruit"),
        tool("segment_phrase", text_prompt="apple"),
        tool("select_masks_and_return", final_answer_masks=[1, 2, 3, 4, 5]),
    ],
    "extended": [
        tool("segment_phrase", text_prompt="fruit"),
        tool("segment_phrase", text_prompt="fruit", like=[1, 2], unlike=[6]),
        tool("select_masks_and_return", final_answer_masks=[1, 2, 3, 4, 5]),
    ],
}


def fruit(count: int) -> Detections:
    masks = np.stack([square_mask(H, W, 40 + 60 * (i % 2), 20 + 85 * i, 50) for i in range(count)])
    return Detections.from_masks(masks, [0.95 - 0.05 * i for i in range(count)])


def main() -> None:
    image = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    print(f"{'tool set':<16} {'calls':>5} {'system':>7} {'prompt tokens':>14} {'per call':>9}")
    for tool_set, script in SCRIPTS.items():
        segmenter = FakeSegmenter({"fruit": fruit(7), "apple": fruit(5)})
        for protocol in ("tags", "native"):
            chat = ScriptedChatModel(replies=list(script))
            config = AgentConfig(tool_set=tool_set, tool_protocol=protocol)  # type: ignore[arg-type]
            agent = Sam3Agent(segmenter, chat, config)
            result = agent.run(image, "all the apples")
            estimate = result.usage.to_dict()["estimated_prompt_tokens"]["main"]["total"]
            calls = len(chat.main_calls)
            system = agent.token_counter.text(agent.system_prompt)
            label = f"{tool_set}/{protocol}"
            print(f"{label:<16} {calls:>5} {system:>7} {estimate:>14} {estimate / calls:>9.0f}")


if __name__ == "__main__":
    main()
