"""What the demo's video tests share: a clip uploaded as Gradio stores it, the video agent the
runner builds on the first request, and a model that can be held mid-session.

The session is scripted: SAM 3 (the fake video segmenter) finds the red square for "red
square" and both squares for "square"; the model segments "red square", then selects track 1.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.clips import LEFT_AND_RIGHT, write_mp4
from tests.support.fakes import FakeVideoSegmenter, tool

RED, GREEN = LEFT_AND_RIGHT
QUERY = "the square that moves left"
SEGMENT = tool("segment_phrase", text_prompt="red square")
SELECT = tool("select_masks_and_return", final_answer_masks=[1])
FRAMES = 12


def upload(tmp_path: Path, name: str = "clip.mp4", frames: int = FRAMES) -> Path:
    """A clip where Gradio keeps an upload: its own name under a temporary folder."""
    folder = tmp_path / "gradio" / "5f0c1d2e"
    folder.mkdir(parents=True, exist_ok=True)
    return write_mp4(folder / name, frames)


class HeldChat:
    """Answers a session by its turn (segment, then select); from turn ``hold`` on (0-based,
    None: never) it waits until released or cancelled. Stateless across sessions, so any
    number may run at once; safe to share."""

    name = "scripted-video"

    def __init__(self, hold: int | None = None) -> None:
        self.hold = hold
        self.waiting = asyncio.Event()
        self.calls = 0

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.calls += 1
        turn = sum(m.role == "assistant" for m in messages)
        if self.hold is not None and turn >= self.hold:
            self.waiting.set()
            await asyncio.Event().wait()
        return ChatResponse(text=SEGMENT if turn == 0 else SELECT)


class VideoAgentBuilds:
    """The runner's ``build_agent``: counts builds; ``gate`` (set to let it finish) holds a
    build as a slow model load does; ``error`` makes it fail."""

    def __init__(self, chat: HeldChat | None = None, error: Exception | None = None) -> None:
        self.chat = chat or HeldChat()
        self.error = error
        self.count = 0
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def __call__(self) -> Sam3VideoAgent:
        self.count += 1
        self.started.set()
        if self.gate is not None:
            self.gate.wait(timeout=60)
        if self.error is not None:
            raise self.error
        segmenter = FakeVideoSegmenter({"square": (RED, GREEN), "red square": (RED,)})
        return Sam3VideoAgent(segmenter, self.chat, AgentConfig(max_rounds=6))  # type: ignore[arg-type]
