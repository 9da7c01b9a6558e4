"""What a round event carries for a live view, and what a stopped session leaves on disk."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sam3_agent.agent.loop import STOPPED, RoundEvent, Sam3Agent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.messages import ChatMessage, ChatResponse, TokenUsage, ToolSpec
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool


def test_round_events_carry_reasoning_images_checks_and_cost(
    image: np.ndarray, three_cats: Detections
) -> None:
    segment = tool("segment_phrase", text_prompt="cat")  # reasons inside <think>
    chat = ScriptedChatModel(
        replies=[
            ChatResponse(text=segment, usage=TokenUsage(1000, 20, 1)),
            ChatResponse(
                text=tool("examine_each_mask"),
                usage=TokenUsage(900, 10, 1),
                reasoning="Check each one.",
            ),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ],
        verdicts={2: "Not a cat. <verdict>Reject</verdict>"},
        prompt_tokens=50,
        completion_tokens=5,
    )
    agent = Sam3Agent(FakeSegmenter({"cat": three_cats}), chat, AgentConfig())
    events: list[RoundEvent] = []
    agent.run(image, "the cats", on_round=events.append)

    first, second, last = events
    assert first.reasoning == "Working on it."
    assert first.parameters == {"text_prompt": "cat"}
    assert first.image is not None and first.image.mime == "image/jpeg"
    assert "3" in first.observation and first.checks == ()
    assert first.usage == TokenUsage(1000, 20, 1)

    # The reasoning channel wins over <think> text; checks come in mask order with what
    # each checker saw, and their tokens count toward the round.
    assert second.reasoning == "Check each one."
    assert [(c.number, c.accepted) for c in second.checks] == [(1, True), (2, False), (3, True)]
    assert second.checks[1].reply == "Not a cat. <verdict>Reject</verdict>"
    assert all(c.zoom_image.data and c.mask_image.data for c in second.checks)
    assert second.usage == TokenUsage(900 + 3 * 50, 10 + 3 * 5, 4)
    assert second.image is not None  # the survivors, renumbered

    assert last.kind == "final" and last.image is None and last.observation == ""
    assert all(e.seconds >= 0 for e in events)


class BlockingChat:
    """Answers the first round, then never answers: the session can only be stopped."""

    name = "blocking"

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = asyncio.Event()

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.calls += 1
        if self.calls == 1:
            return ChatResponse(text=tool("segment_phrase", text_prompt="cat"))
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_cancelled_session_writes_what_it_has(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    chat = BlockingChat()
    agent = Sam3Agent(FakeSegmenter({"cat": three_cats}), chat, AgentConfig())
    events: list[RoundEvent] = []
    task = asyncio.create_task(
        agent.arun(image, "cat", output_dir=tmp_path / "run", on_round=events.append)
    )
    await chat.waiting.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert task.cancelled()
    assert [e.tool for e in events] == ["segment_phrase"]
    document = json.loads((tmp_path / "run" / "result.json").read_text())
    assert document["status"] == "failed" and document["failure"] == STOPPED
    assert document["rounds"] == 2 and document["phrases_tried"] == ["cat"]
    assert (tmp_path / "run" / "overlay.png").exists()
    assert (tmp_path / "run" / "trace.jsonl").read_text().count('"kind": "main"') == 1
