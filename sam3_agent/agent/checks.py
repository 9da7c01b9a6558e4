"""What ``examine_each_mask`` shows a checker of each candidate and what it answered; the
pipeline that asks is :meth:`sam3_agent.agent.session.Session.check`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sam3_agent.agent.parsing import Verdict
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, TokenUsage


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
    """Whether a checker may answer Uncertain, and how many closer looks that earns."""

    uncertain: bool = False
    extra_looks: int = 0
