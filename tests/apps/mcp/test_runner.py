"""The runner of an MCP server's calls, in process: calls beyond ``max_concurrent`` wait for
a slot, on the models it was given (built once)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from sam3_agent.agent.events import RoundEvent
from sam3_agent.apps.mcp.runner import McpRunner
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.fakes import FakeSegmenter, tool


class GatedChat:
    """Reports no mask, each call once ``gate`` is set; ``calls`` are set as the first and
    the second call arrive, ``count`` counts them."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]
        self.count = 0

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.calls[min(self.count, 1)].set()
        self.count += 1
        await self.gate.wait()
        return ChatResponse(text=tool("report_no_mask"))


async def test_calls_beyond_max_concurrent_wait_for_a_slot(tmp_path: Path) -> None:
    image = tmp_path / "photo.png"
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(image)
    chat = GatedChat()
    runner = McpRunner(
        BackendSpec(), AgentConfig(), tmp_path / "runs", max_concurrent=1,
        segmenter=FakeSegmenter(), chat_model=chat,
    )  # fmt: skip
    rounds: list[RoundEvent] = []

    async def report(event: RoundEvent) -> None:
        rounds.append(event)

    first = asyncio.create_task(runner.segment(str(image), None, "the first", report))
    await chat.calls[0].wait()
    second = asyncio.create_task(runner.segment(str(image), None, "the second", report))
    # The second call cannot reach the model while the first holds the only slot.
    done, _ = await asyncio.wait({asyncio.ensure_future(chat.calls[1].wait())}, timeout=0.5)
    assert not done and chat.count == 1
    chat.gate.set()
    answers = await asyncio.gather(first, second)
    assert chat.count == 2 and [a.result.status for a in answers] == ["no_mask", "no_mask"]
    assert [e.tool for e in rounds] == ["report_no_mask", "report_no_mask"]
    assert len({a.directory for a in answers}) == 2
