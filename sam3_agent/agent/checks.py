"""``examine_each_mask``: one isolated, concurrent MLLM check per candidate; a reply without
a clear verdict is asked again, then taken as Reject. Where the medium allows Uncertain, a
candidate gets closer looks, each counted against ``max_mask_checks``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sam3_agent.agent import rundir
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.parsing import Verdict, parse_verdict
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.result import Usage
from sam3_agent.agent.trace import Trace
from sam3_agent.backends.base import ChatModel
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    Part,
    TextPart,
    TokenUsage,
)


@dataclass(frozen=True)
class CheckRequest:
    """What the checker sees of candidate ``number`` (1-based) in one look: ``images``, then
    ``checker_user`` rendered with ``details`` too; the round's event shows the other two."""

    number: int
    total: int
    images: tuple[EncodedImage, ...]
    mask_image: EncodedImage
    zoom_image: EncodedImage
    details: Mapping[str, object] = field(default_factory=dict)

    async def request(self, look: int) -> CheckRequest:
        return self  # a request rendered ahead is its own one look

    def closer(self, reply: str) -> None:
        """Never asked: a medium without Uncertain verdicts has one look."""


class CheckView(Protocol):
    """How a medium shows one candidate to its checker, look after look."""

    @property
    def number(self) -> int: ...

    async def request(self, look: int) -> CheckRequest: ...

    def closer(self, reply: str) -> None: ...


@dataclass
class CheckResult:
    """The verdict on one candidate; ``forced``: none was clear, Reject was assumed."""

    number: int
    verdict: Verdict
    forced: bool = False
    replies: list[str] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    cached_calls: int = 0

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"


@dataclass(frozen=True)
class CheckCall:
    number: int
    attempt: int
    messages: list[ChatMessage]
    response: ChatResponse
    verdict: Verdict | None
    latency_s: float


@dataclass(frozen=True)
class CheckPlan:
    uncertain: bool = False
    extra_looks: int = 0


class CheckingSession(Protocol):
    config: AgentConfig
    prompts: PromptSet
    chat_model: ChatModel
    query: str
    checker_prompt: str
    token_counter: TokenCounter
    trace: Trace
    round: int
    checks_used: int
    usage: Usage
    last_checks: list[tuple[CheckRequest, CheckResult]]

    @property
    def checks_left(self) -> int: ...


async def check_one(
    session: CheckingSession,
    view: CheckView,
    plan: CheckPlan,
    record: Callable[[CheckCall], None],
    shown: dict[int, CheckRequest],
) -> CheckResult:
    """Check one candidate, every call counted and recorded, its last request kept in ``shown``."""
    prompts, config = session.prompts, session.config
    result = CheckResult(number=view.number, verdict="reject")
    attempt = 0

    def spent() -> bool:
        return plan.uncertain and session.checks_left <= 0

    for look in range(1, 2 + plan.extra_looks):
        if spent():
            break
        request = await view.request(look)
        shown[view.number] = request
        question = prompts.render(
            "checker_user",
            query=session.query,
            number=request.number,
            total=request.total,
            **request.details,
        )
        parts: tuple[Part, ...] = (*map(ImagePart, request.images), TextPart(question))
        messages = [ChatMessage.text("system", session.checker_prompt), ChatMessage("user", parts)]
        verdict: Verdict | None = None
        for _ in range(config.verdict_retries + 1):
            if spent():
                break
            attempt += 1
            session.checks_used += 1
            started = time.perf_counter()
            response = await session.chat_model.complete(messages)
            elapsed = time.perf_counter() - started
            result.usage = result.usage + response.usage
            session.usage.checks = session.usage.checks + response.usage
            result.cached_calls += int(response.cached)
            session.usage.cached_calls += int(response.cached)
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


async def check_all(
    session: CheckingSession, views: Sequence[CheckView], plan: CheckPlan
) -> list[CheckResult]:
    """Check every candidate concurrently (results in order, calls traced in order)."""
    semaphore = asyncio.Semaphore(session.config.check_concurrency)
    calls: list[CheckCall] = []
    shown: dict[int, CheckRequest] = {}

    async def bounded(view: CheckView) -> CheckResult:
        async with semaphore:
            return await check_one(session, view, plan, calls.append, shown)

    tasks = [asyncio.ensure_future(bounded(view)) for view in views]
    try:
        results = list(await asyncio.gather(*tasks))
    except BaseException:
        # One failed check (endpoint down) fails the round; do not leave the rest running.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    session.last_checks = [(shown[r.number], r) for r in results if r.number in shown]
    ordered = sorted(calls, key=lambda c: (c.number, c.attempt))
    # Counted here, on the loop, once per call: the tokenizer is shared by every session
    # of the process, and the trace thread reuses these figures.
    estimates = [session.token_counter.messages(call.messages) for call in ordered]
    for tokens in estimates:
        session.usage.add_estimate("checks", tokens.text, tokens.image)
    if session.trace.enabled:
        by_number = {r.number: r for r in results}

        def write_records() -> None:
            trace = session.trace
            for call, tokens in zip(ordered, estimates, strict=True):
                result = by_number[call.number]
                record = {
                    "kind": "check",
                    "round": session.round,
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
