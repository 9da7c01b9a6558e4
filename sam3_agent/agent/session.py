"""The state of one agent session, image or video, and the services its tools use; what
differs by medium (how SAM 3 is asked, what the model and checkers see) is its :class:`Scene`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol

from sam3_agent.agent.checkpoint.state import Ending, SessionState
from sam3_agent.agent.checks import CheckPlan, CheckRequest, CheckResult, CheckView, check_all
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.result import Usage
from sam3_agent.agent.steps import ActionStep, C, ToolMistake
from sam3_agent.agent.trace import Trace
from sam3_agent.backends.base import ChatModel
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.images import EncodedImage, RGBImage


class Scene(Protocol[C]):
    """What a medium supplies to one session: how SAM 3 is asked and what is shown."""

    answer_type: type[C]
    task_image: EncodedImage
    check_plan: CheckPlan

    @property
    def mask_size(self) -> tuple[int, int]: ...

    def start(self, session: Session[C]) -> None: ...

    async def close(self) -> None: ...

    def empty(self) -> C: ...

    async def segment(self, session: Session[C], phrase: str) -> tuple[C, str]: ...

    def numbered(self, candidates: C) -> RGBImage: ...

    def describe(self, candidates: C, prompts: PromptSet) -> str | None: ...

    async def check_views(self, session: Session[C], candidates: C) -> Sequence[CheckView]: ...


@dataclass(eq=False)
class Session(Generic[C]):
    """One request: its scene, a query, and everything that changes while answering it."""

    config: AgentConfig
    scene: Scene[C]
    chat_model: ChatModel
    query: str
    prompts: PromptSet
    checker_prompt: str
    trace: Trace
    token_counter: TokenCounter = field(default_factory=TokenCounter)
    phrases: list[str] = field(default_factory=list, init=False)
    current: C | None = field(default=None, init=False)
    round: int = field(default=0, init=False)
    checks_used: int = field(default=0, init=False)
    last_checks: list[tuple[CheckRequest, CheckResult]] = field(default_factory=list, init=False)
    usage: Usage = field(default_factory=Usage, init=False)
    timings: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float), init=False)
    started: float = field(default_factory=time.perf_counter, init=False)
    _earlier_s: float = field(default=0.0, init=False)  # wall seconds of work before a resume
    _ended_s: float | None = field(default=None, init=False)  # the total at the ending's commit

    @property
    def task_image(self) -> EncodedImage:
        return self.scene.task_image

    def restore(self, state: SessionState) -> None:
        current = state.current
        answer_type = self.scene.answer_type
        if current is not None and not isinstance(current, answer_type):
            raise TypeError(
                f"a session of {answer_type.__name__} cannot continue from {type(current).__name__}"
            )
        self.round = state.round
        self.phrases = list(state.phrases)
        self.current = current  # checked just above
        self.checks_used = state.checks_used
        self.usage = state.usage
        timings = dict(state.timings)
        earlier = timings.pop("total", None)  # absent from sessions committed before it was
        self._earlier_s = earlier or 0.0
        if state.ending is not None and earlier is not None:
            self._ended_s = earlier
        for phase, seconds in timings.items():
            self.timings[phase] += seconds

    def total_s(self) -> float:
        """Wall seconds of work on the session, a resume's earlier work included, up to the
        commit of its ending."""
        if self._ended_s is not None:
            return self._ended_s
        return self._earlier_s + time.perf_counter() - self.started

    def snapshot(
        self,
        steps: Sequence[ActionStep],
        corrections: int,
        ending: Ending | None = None,
        context: dict[str, Any] | None = None,
    ) -> SessionState:
        """The state to commit after this round; ``context``: the context policy's own state."""
        total = self.total_s()
        if ending is not None:
            self._ended_s = total
        return SessionState(
            round=self.round,
            corrections=corrections,
            steps=list(steps),
            phrases=list(self.phrases),
            current=self.current,
            checks_used=self.checks_used,
            usage=self.usage,
            timings={**self.timings, "total": total},
            ending=ending,
            context=context,
        )

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] += time.perf_counter() - started

    def require_masks(self, tool_name: str) -> C:
        if self.current is None or len(self.current) == 0:
            raise ToolMistake(self.prompts.feedback("no_current_masks", name=tool_name))
        return self.current

    @property
    def checks_left(self) -> int:
        return self.config.max_mask_checks - self.checks_used

    async def select(self, candidates: C, indices: list[int]) -> C:
        """``candidates`` at 0-based ``indices``, off the event loop (copying masks takes ms)."""
        return await asyncio.to_thread(candidates.select, indices)

    async def segment(self, phrase: str) -> tuple[C, str]:
        """SAM 3 on ``phrase``: the candidates (now the current ones), the phrase as read."""
        found, used = await self.scene.segment(self, phrase)
        self.phrases.append(phrase)
        self.current = found if len(found) else None
        return found, used

    async def show_masks(self, candidates: C) -> EncodedImage:
        name = f"r{self.round:03d}_masks"

        def render() -> EncodedImage:
            image = EncodedImage.encode(
                self.scene.numbered(candidates), name, quality=self.config.jpeg_quality
            )
            self.trace.save_image(image)
            return image

        with self.timed("render"):
            return await asyncio.to_thread(render)

    async def check(self, candidates: C) -> list[CheckResult]:
        with self.timed("render"):
            views = await self.scene.check_views(self, candidates)
        with self.timed("checks"):
            return await check_all(self, views, self.scene.check_plan)
