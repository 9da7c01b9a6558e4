"""What runs after each round, in order: the trace record, the commit (the state points past
the record), then the caller's :class:`RoundEvent` (what it shows is saved)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sam3_agent.agent import rundir
from sam3_agent.agent.parsing import ParsedReply
from sam3_agent.agent.steps import ActionStep
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatResponse, TokenUsage

if TYPE_CHECKING:
    from sam3_agent.agent.checkpoint import Checkpoint, Ending
    from sam3_agent.agent.context import Context, ContextPolicy, Tokens
    from sam3_agent.agent.context.summary import DigestCall, DigestSink
    from sam3_agent.agent.context.tokens import TokenCounter
    from sam3_agent.agent.session import Session


@dataclass(frozen=True)
class MaskCheck:
    """One mask's check in an ``examine_each_mask`` round (``number`` 1-based), with the
    images the checker saw."""

    number: int
    accepted: bool
    reply: str
    mask_image: EncodedImage
    zoom_image: EncodedImage


@dataclass(frozen=True)
class RoundEvent:
    """One finished main round (``round`` 1-based; ``tool`` None without a readable call);
    ``summary`` is the observation's first sentence; ``usage`` and ``seconds`` include checks."""

    round: int
    tool: str | None
    kind: str
    summary: str
    reasoning: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    image: EncodedImage | None = None
    checks: tuple[MaskCheck, ...] = ()
    usage: TokenUsage = field(default_factory=TokenUsage)
    seconds: float = 0.0


RoundCallback = Callable[[RoundEvent], None]


@dataclass(frozen=True, kw_only=True)
class FinishedRound:
    """One main round as the loop finished it (``step`` is in ``steps`` unless it ended the
    session; ``started``: its ``time.perf_counter()``)."""

    step: ActionStep
    context: Context
    tokens: Tokens
    response: ChatResponse
    parsed: ParsedReply
    started: float
    latency_s: float
    steps: Sequence[ActionStep]
    corrections: int
    ending: Ending | None


class RoundHook(Protocol):
    async def __call__(self, session: Session[Any], done: FinishedRound) -> None: ...


class TraceHook:
    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter

    async def __call__(self, session: Session[Any], done: FinishedRound) -> None:
        if not session.trace.enabled:
            return
        # Counted on the loop (the tokenizer is shared by every session of the process).
        per_message = self._counter.per_message(done.context.messages)

        def write() -> None:
            round_s = time.perf_counter() - done.started  # the call and the tool, checks included
            trace, context = session.trace, done.context
            response, parsed, step = done.response, done.parsed, done.step
            image = step.observation.image
            tokens = {**done.tokens.to_dict(), "per_message": per_message}
            # The context is saved first, its images with it, then the outcome's image.
            record = {
                "kind": "main",
                "round": step.round,
                "context": trace.messages(context.messages, system_ref=rundir.SYSTEM_PROMPT),
                "pruning": {
                    "kept_rounds": context.kept_rounds,
                    "dropped_rounds": context.dropped_rounds,
                    "images_replaced_by_text": context.images_replaced,
                    "tried_phrases_note": context.tried_phrases,
                },
                "reply": response.text,
                "reasoning": response.reasoning,
                "thinking": parsed.thinking,
                "finish_reason": response.finish_reason,
                "cut_after_first_tool": parsed.cut,
                "ignored_after_json": parsed.ignored,
                "tool_call": (
                    {"name": parsed.call.name, "parameters": parsed.call.parameters}
                    if parsed.call
                    else None
                ),
                "outcome": {
                    "kind": step.kind,
                    "text": step.observation.text,
                    "image": trace.save_image(image) if image is not None else None,
                },
                "usage": response.usage.to_dict(),
                "tokens_estimate": {**tokens, "source": self._counter.source},
                "context_policy": context.eviction.to_dict()
                if context.eviction is not None
                else None,
                "cached": response.cached,
                "latency_s": round(done.latency_s, 4),  # the MLLM call
                "round_s": round(round_s, 4),
            }
            trace.record(record)

        # Image saves and the record's write are file work: off the event loop, awaited here
        # so records keep their order.
        await asyncio.to_thread(write)


class CommitHook:
    def __init__(self, checkpoint: Checkpoint, policy: ContextPolicy) -> None:
        self._checkpoint = checkpoint
        self._policy = policy

    async def __call__(self, session: Session[Any], done: FinishedRound) -> None:
        # The policy's own state (digests, mode) too, so a resumed session continues it.
        ending = done.ending
        if ending is not None:
            # Before the commit: a digest that was still being written is in the committed
            # usage and trace, as in a resumed session.
            await self._policy.settle()
        context = None if ending is not None else await self._policy.save_state()
        state = session.snapshot(done.steps, done.corrections, ending, context)
        # Off the event loop: encoding masks and syncing files must not hold up the other
        # sessions of a batch evaluation.
        await asyncio.to_thread(self._checkpoint.commit, state)


class EventHook:
    def __init__(self, on_round: RoundCallback) -> None:
        self._on_round = on_round

    async def __call__(self, session: Session[Any], done: FinishedRound) -> None:
        seconds = time.perf_counter() - done.started
        step, response = done.step, done.response
        tool = step.call.name if step.call else None
        summary = step.observation.text.split(". ")[0] if step.observation.text else tool or ""
        checks: list[MaskCheck] = []
        usage = response.usage
        if step.kind == "examine":  # only an executed examine_each_mask ran checks this round
            for request, result in session.last_checks:
                reply = result.replies[-1] if result.replies else ""
                mask, zoom = request.mask_image, request.zoom_image
                checks.append(MaskCheck(request.number, result.accepted, reply, mask, zoom))
                usage = usage + result.usage
        event = RoundEvent(
            round=step.round,
            tool=tool,
            kind=step.kind,
            summary=summary,
            reasoning=(response.reasoning or done.parsed.thinking or "").strip(),
            parameters=dict(step.call.parameters) if step.call else {},
            observation=step.observation.text,
            image=step.observation.image,
            checks=tuple(checks),
            usage=usage,
            seconds=seconds,
        )
        self._on_round(event)


def digest_sink(session: Session[Any], counter: TokenCounter) -> DigestSink:
    """A sink counting each digest call in ``session.usage.digests`` and tracing it."""

    def record(call: DigestCall) -> None:
        usage = session.usage
        usage.digests = usage.digests + call.response.usage
        usage.cached_calls += int(call.response.cached)
        tokens = counter.messages(call.messages)
        usage.add_estimate("digests", tokens.text, tokens.image)
        if session.trace.enabled:
            entry = {
                "kind": "digest",
                "round": session.round,
                "rounds_condensed": list(call.rounds),
                "blocking": call.blocking,
                "context": session.trace.messages(call.messages),
                "reply": call.response.text,
                "usage": call.response.usage.to_dict(),
                "tokens_estimate": tokens.to_dict(),
                "latency_s": round(call.latency_s, 4),
            }
            session.trace.record(entry)

    return record
