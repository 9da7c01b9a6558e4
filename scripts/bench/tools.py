"""What each tool set costs: one request answered with the paper's tools and with the
extended ones, through the real agent with a scripted MLLM, side by side in MLLM calls and
estimated prompt tokens (the agent's own estimate, as a run's ``tokens_estimate``).

The request wants all seven apples; the phrase finds seven candidates (two of them pears).
``paper``: a second, narrower phrase, then the selection. ``extended``: the same phrase again
with two apples as ``like`` and a pear as ``unlike`` exemplars, then the selection. The fake
SAM 3 answers both second searches alike, so the difference is the tools' own cost: the
longer system prompt and tool schema, and the exemplar parameters in the replies.

A second request wants the man and his dog. ``paper``: one phrase naming both ("man and dog",
which the fake SAM 3 answers with both; the real one may not), then the selection.
``extended``: "man", ``keep_masks``, "dog", then the selection: one call more, and the kept
set's note in every later request.

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
    ("all the apples", "paper"): [
        tool("segment_phrase", text_prompt="fruit"),
        tool("segment_phrase", text_prompt="apple"),
        tool("select_masks_and_return", final_answer_masks=[1, 2, 3, 4, 5]),
    ],
    ("all the apples", "extended"): [
        tool("segment_phrase", text_prompt="fruit"),
        tool("segment_phrase", text_prompt="fruit", like=[1, 2], unlike=[6]),
        tool("select_masks_and_return", final_answer_masks=[1, 2, 3, 4, 5]),
    ],
    ("the man and his dog", "paper"): [
        tool("segment_phrase", text_prompt="man and dog"),
        tool("select_masks_and_return", final_answer_masks=[1, 2]),
    ],
    ("the man and his dog", "extended"): [
        tool("segment_phrase", text_prompt="man"),
        tool("keep_masks", masks=[1]),
        tool("segment_phrase", text_prompt="dog"),
        tool("select_masks_and_return", final_answer_masks=[1]),
    ],
}


def fruit(count: int) -> Detections:
    masks = np.stack([square_mask(H, W, 40 + 60 * (i % 2), 20 + 85 * i, 50) for i in range(count)])
    return Detections.from_masks(masks, [0.95 - 0.05 * i for i in range(count)])


def main() -> None:
    image = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    found = {"fruit": fruit(7), "apple": fruit(5), "man and dog": fruit(2)}
    found |= {"man": fruit(2)[[0]], "dog": fruit(2)[[1]]}
    print(f"{'request':<20} {'tool set':<16} {'calls':>5} {'system':>7} {'prompt tokens':>14} "
          f"{'per call':>9} {'masks':>5}")  # fmt: skip
    for (query, tool_set), script in SCRIPTS.items():
        segmenter = FakeSegmenter(found)
        for protocol in ("tags", "native"):
            chat = ScriptedChatModel(replies=list(script))
            config = AgentConfig(tool_set=tool_set, tool_protocol=protocol)  # type: ignore[arg-type]
            agent = Sam3Agent(segmenter, chat, config)
            result = agent.run(image, query)
            estimate = result.usage.to_dict()["estimated_prompt_tokens"]["main"]["total"]
            calls = len(chat.main_calls)
            system = agent.token_counter.text(agent.system_prompt)
            label = f"{tool_set}/{protocol}"
            print(
                f"{query:<20} {label:<16} {calls:>5} {system:>7} {estimate:>14} "
                f"{estimate / calls:>9.0f} {len(result.detections):>5}"
            )


if __name__ == "__main__":
    main()
