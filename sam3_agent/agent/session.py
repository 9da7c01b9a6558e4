"""The state of one agent session and the services its tools use (the mask checks among
them); what differs by medium (how SAM 3 is asked, what is shown) is its :class:`Scene`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.state import Ending, SessionState
from sam3_agent.agent.checks import CheckCall, CheckPlan, CheckRequest, CheckResult, CheckView
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.parsing import Verdict, parse_verdict
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.result import Usage
from sam3_agent.agent.steps import ActionStep, C, ToolMistake
from sam3_agent.agent.trace import Trace
from sam3_agent.backends.base import ChatModel
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Exemplars
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.messages import ChatMessage, ImagePart, Part, TextPart


class Scene(Protocol[C]):
    """What a medium supplies to one session: how SAM 3 is asked and what is shown (a subclass
    gets the defaults: nothing to start or close, no text beside the image, one look)."""

    answer_type: type[C]
    task_image: EncodedImage
    check_plan: CheckPlan = CheckPlan()

    @property
    def mask_size(self) -> tuple[int, int]: ...

    def start(self, session: Session[C]) -> None:
        return None  # nothing to start before the first round

    async def close(self) -> None:
        return None  # nothing is left running between rounds

    def empty(self) -> C: ...

    async def segment(
        self, session: Session[C], phrase: str, exemplars: Exemplars | None = None
    ) -> tuple[C, str]:
        """SAM 3 on ``phrase`` (with ``exemplars``, boxes on the input): the candidates found
        and the phrase as read."""
        ...

    def numbered(self, candidates: C, kept: C | None = None) -> RGBImage:
        """``candidates`` numbered, over the ``kept`` ones drawn apart."""
        ...

    def describe(self, candidates: C, prompts: PromptSet) -> str | None:
        return None

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
    kept: C | None = field(default=None, init=False)
    """``keep_masks``' set (the extended tools): part of the answer, whatever is searched next."""
    kept_from: list[str] = field(default_factory=list, init=False)
    """The search each of :attr:`kept` came from, in order."""
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
        self.kept = state.kept if isinstance(state.kept, answer_type) else None
        self.kept_from = list(state.kept_from)
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
            kept=self.kept,
            kept_from=list(self.kept_from),
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

    def kept_note(self) -> str:
        """The note naming the kept masks, pinned after the request ("" when none are)."""
        if not self.kept:
            return ""
        kept = [{"label": f"K{i + 1}", "phrase": p} for i, p in enumerate(self.kept_from)]
        return self.prompts.render("kept_note", kept_masks=kept)

    async def keep(self, candidates: C, indices: list[int]) -> list[int]:
        """Add ``candidates`` at 0-based ``indices`` to the kept set (found by the latest
        search), merging the same object; where each went in it (0-based)."""
        chosen = await self.select(candidates, indices)
        base = self.scene.empty() if self.kept is None else self.kept
        kept, where = await asyncio.to_thread(base.merged, chosen)
        self.kept_from += [self.phrases[-1]] * (len(kept) - len(base))
        self.kept = kept
        return where

    async def segment(
        self, phrase: str, exemplars: Exemplars | None = None, *, tried_as: str | None = None
    ) -> tuple[C, str]:
        """SAM 3 on ``phrase`` (and ``exemplars``): the candidates (now the current ones), the
        phrase as read; the search is recorded as tried under ``tried_as`` (else ``phrase``)."""
        found, used = await self.scene.segment(self, phrase, exemplars)
        self.phrases.append(tried_as or phrase)
        self.current = found if len(found) else None
        return found, used

    async def show_masks(self, candidates: C) -> EncodedImage:
        name = f"r{self.round:03d}_masks"

        def render() -> EncodedImage:
            image = EncodedImage.encode(
                self.scene.numbered(candidates, self.kept), name, quality=self.config.jpeg_quality
            )
            self.trace.save_image(image)
            return image

        with self.timed("render"):
            return await asyncio.to_thread(render)

    async def check(self, candidates: C) -> list[CheckResult]:
        """One isolated, concurrent MLLM check per candidate (results and trace in order); an
        unclear verdict is asked again, then taken as Reject; Uncertain earns closer looks."""
        with self.timed("render"):
            views = await self.scene.check_views(self, candidates)
        with self.timed("checks"):
            return await self._check_all(views)

    async def _check_all(self, views: Sequence[CheckView]) -> list[CheckResult]:
        semaphore = asyncio.Semaphore(self.config.check_concurrency)
        calls: list[CheckCall] = []
        shown: dict[int, CheckRequest] = {}

        async def bounded(view: CheckView) -> CheckResult:
            async with semaphore:
                return await self._check_one(view, calls.append, shown)

        tasks = [asyncio.ensure_future(bounded(view)) for view in views]
        try:
            results = list(await asyncio.gather(*tasks))
        except BaseException:
            # One failed check (endpoint down) fails the round; do not leave the rest running.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        self.last_checks = [(shown[r.number], r) for r in results if r.number in shown]
        ordered = sorted(calls, key=lambda c: (c.number, c.attempt))
        # Counted here, on the loop, once per call: the tokenizer is shared by every session
        # of the process, and the trace thread reuses these figures.
        estimates = [self.token_counter.messages(call.messages) for call in ordered]
        for tokens in estimates:
            self.usage.add_estimate("checks", tokens.text, tokens.image)
        if self.trace.enabled:
            by_number = {r.number: r for r in results}

            def write_records() -> None:
                trace = self.trace
                for call, tokens in zip(ordered, estimates, strict=True):
                    result = by_number[call.number]
                    record = {
                        "kind": "check",
                        "round": self.round,
                        "mask": call.number,
                        "attempt": call.attempt,
                        "context": trace.messages(call.messages, system_ref=rundir.CHECKER_PROMPT),
                        "reply": call.response.text,
                        "reasoning": call.response.reasoning,
                        "verdict": call.verdict,
                        "forced_reject": result.forced and call.attempt == len(result.replies),
                        "usage": call.response.usage.to_dict(),
                        "tokens_estimate": tokens.to_dict(),
                        "cached": call.response.cached,
                        "latency_s": round(call.latency_s, 4),
                    }
                    trace.record(record)

            await asyncio.to_thread(write_records)
        return results

    async def _check_one(
        self, view: CheckView, record: Callable[[CheckCall], None], shown: dict[int, CheckRequest]
    ) -> CheckResult:
        """Check one candidate, every call counted and recorded, its last request kept in
        ``shown``."""
        prompts, plan = self.prompts, self.scene.check_plan
        result = CheckResult(number=view.number, verdict="reject")
        attempt = 0

        def spent() -> bool:
            return plan.uncertain and self.checks_left <= 0

        for look in range(1, 2 + plan.extra_looks):
            if spent():
                break
            request = await view.request(look)
            shown[view.number] = request
            question = prompts.render(
                "checker_user",
                query=self.query,
                number=request.number,
                total=request.total,
                **request.details,
            )
            parts: tuple[Part, ...] = (*map(ImagePart, request.images), TextPart(question))
            messages = [ChatMessage.text("system", self.checker_prompt), ChatMessage("user", parts)]
            verdict: Verdict | None = None
            for _ in range(self.config.verdict_retries + 1):
                if spent():
                    break
                attempt += 1
                self.checks_used += 1
                started = time.perf_counter()
                response = await self.chat_model.complete(messages)
                elapsed = time.perf_counter() - started
                result.usage = result.usage + response.usage
                self.usage.checks = self.usage.checks + response.usage
                self.usage.cached_calls += int(response.cached)
                result.replies.append(response.text)
                verdict = parse_verdict(response.text, allow_uncertain=plan.uncertain)
                record(CheckCall(view.number, attempt, messages, response, verdict, elapsed))
                if verdict is not None:
                    break
                messages = [
                    *messages,
                    ChatMessage.text("assistant", response.text),
                    ChatMessage.text("user", prompts.feedback("verdict_unclear")),
                ]
            if verdict is None:
                result.verdict, result.forced = "reject", True
                break
            result.verdict = verdict
            if verdict != "uncertain":
                break
            view.closer(result.replies[-1])
        return result
