"""What the resume tests share: in-process kills and the parts of a result that must match.

A resumed session must end where an uninterrupted one ends; timings are the only fields
allowed to differ.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.fakes import ScriptedChatModel

QUERY = "the two cats"


class Killed(BaseException):
    """Stands in for SIGKILL inside one process: nothing catches it, nothing is written."""


class KilledAt:
    """Passes calls to ``inner`` but dies instead of making call number ``at`` (1-based)."""

    def __init__(self, inner: ScriptedChatModel, at: int) -> None:
        self.inner, self.at, self.made = inner, at, 0

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, attribute: str) -> Any:
        # What else the model offers (its description) is the inner model's.
        return getattr(self.inner, attribute)

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.made += 1
        if self.made == self.at:
            raise Killed
        return await self.inner.complete(messages, tools=tools)


class CtrlCAt(KilledAt):
    """Passes calls to ``inner``; at call number ``at`` (1-based) the process gets SIGINT, as
    Ctrl+C sends it, and the call goes on: ``asyncio.run`` cancels the session at its next
    wait, then raises KeyboardInterrupt."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.made += 1
        if self.made == self.at:
            handler = signal.getsignal(signal.SIGINT)
            # Anything but asyncio.run's own handler would stop the test process instead.
            if getattr(getattr(handler, "func", None), "__name__", None) != "_on_sigint":
                raise AssertionError(f"SIGINT is handled by {handler!r}, not by asyncio.run")
            os.kill(os.getpid(), signal.SIGINT)
        return await self.inner.complete(messages, tools=tools)


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "timings_s"}


def trace_records(directory: Path) -> list[dict[str, Any]]:
    lines = (directory / "trace.jsonl").read_text().splitlines()
    timings = ("latency_s", "round_s")
    records = [{k: v for k, v in json.loads(line).items() if k not in timings} for line in lines]
    for record in records:  # the context policy's own time is a timing too
        if isinstance(record.get("context_policy"), dict):
            record["context_policy"].pop("latency_ms", None)
    return records
