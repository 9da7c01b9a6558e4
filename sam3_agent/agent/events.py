"""What the loop tells its caller after each committed round (the CLI's status line, the demo)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sam3_agent.agent.checks import CheckRequest, CheckResult
from sam3_agent.agent.parsing import ParsedReply
from sam3_agent.agent.steps import ActionStep
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatResponse, TokenUsage


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


def round_event(
    step: ActionStep,
    response: ChatResponse,
    parsed: ParsedReply,
    last_checks: Sequence[tuple[CheckRequest, CheckResult]],
    seconds: float,
) -> RoundEvent:
    """The event of ``step``'s round (``last_checks`` count only if this round ran them)."""
    tool = step.call.name if step.call else None
    summary = step.observation.text.split(". ")[0] if step.observation.text else tool or ""
    checks: list[MaskCheck] = []
    usage = response.usage
    if step.kind == "examine":  # only an executed examine_each_mask ran checks this round
        for request, result in last_checks:
            reply = result.replies[-1] if result.replies else ""
            checks.append(
                MaskCheck(
                    request.number, result.accepted, reply, request.mask_image, request.zoom_image
                )
            )
            usage = usage + result.usage
    return RoundEvent(
        round=step.round,
        tool=tool,
        kind=step.kind,
        summary=summary,
        reasoning=(response.reasoning or parsed.thinking or "").strip(),
        parameters=dict(step.call.parameters) if step.call else {},
        observation=step.observation.text,
        image=step.observation.image,
        checks=tuple(checks),
        usage=usage,
        seconds=seconds,
    )
