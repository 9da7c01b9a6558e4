"""What runs after each round, in order: the trace record, the commit (the state points past
the record), then the caller's :class:`RoundEvent` (what it shows is saved)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sam3_agent.agent import rundir
from sam3_agent.agent.parsing import ParsedReply
from sam3_agent.agent.steps import ActionStep
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatResponse, TokenUsage

if TYPE_CHECKING:
    from sam3_agent.agent.checkpoint import Checkpoint, Ending
    from sam3_agent.agent.context import Context, ContextPolicy, Tokens
    from sam3_agent.agent.context.summary import DigestCall, DigestSink
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


async def trace_round(session: Session[Any], done: FinishedRound) -> None:
    """The round's ``main`` record in the trace (with a trace)."""
    if not session.trace.enabled:
        return
    counter = session.token_counter
    # Counted on the loop (the tokenizer is shared by every session of the process).
    per_message = counter.per_message(done.context.messages)

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
            "tokens_estimate": {**tokens, "source": counter.source},
            "context_policy": context.eviction.to_dict() if context.eviction is not None else None,
            "cached": response.cached,
            "latency_s": round(done.latency_s, 4),  # the MLLM call
            "round_s": round(round_s, 4),
        }
        if session.kept:  # the extended tools' kept set, after this round
            record["kept"] = [
                {"label": f"K{i + 1}", "from": phrase} for i, phrase in enumerate(session.kept_from)
            ]
        trace.record(record)

    # Image saves and the record's write are file work: off the event loop, awaited here
    # so records keep their order.
    await asyncio.to_thread(write)


async def commit_round(
    session: Session[Any], done: FinishedRound, checkpoint: Checkpoint, policy: ContextPolicy
) -> None:
    """Commit the session after ``done``, the policy's own state (digests, mode) too, so a
    resumed session continues it."""
    ending = done.ending
    if ending is not None:
        # Before the commit: a digest that was still being written is in the committed
        # usage and trace, as in a resumed session.
        await policy.settle()
    context = None if ending is not None else await policy.save_state()
    state = session.snapshot(done.steps, done.corrections, ending, context)
    # Off the event loop: encoding masks and syncing files must not hold up the other
    # sessions of a batch evaluation.
    await asyncio.to_thread(checkpoint.commit, state)


def round_event(session: Session[Any], done: FinishedRound) -> RoundEvent:
    """The event of ``done``'s round (the session's last checks count only if it ran them)."""
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
    return RoundEvent(
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


def digest_sink(session: Session[Any]) -> DigestSink:
    """A sink counting each digest call in ``session.usage.digests`` and tracing it."""

    def record(call: DigestCall) -> None:
        usage = session.usage
        usage.digests = usage.digests + call.response.usage
        usage.cached_calls += int(call.response.cached)
        tokens = session.token_counter.messages(call.messages)
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
