"""Chat messages as backends receive them, and what a backend sends back.

Backends translate these typed values into their own wire format (OpenAI JSON, a
transformers chat template); the agent never builds provider-specific dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sam3_agent.values.images import EncodedImage

Role = Literal["system", "user", "assistant", "tool"]
"""``tool`` carries the result of a native tool call (see :attr:`ChatMessage.tool_call_id`)."""


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    image: EncodedImage


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ChatMessage:
    """One message: a role and an ordered tuple of text and image parts.

    With native tool calling, an ``assistant`` message may carry the ``tool_calls`` it made,
    and a ``tool`` message answers the call whose id is ``tool_call_id`` (text only: OpenAI
    tool messages cannot hold images, so an image result follows as a user message).
    """

    role: Role
    parts: tuple[Part, ...]
    tool_calls: tuple[NativeToolCall, ...] = ()
    tool_call_id: str | None = None

    @classmethod
    def text(cls, role: Role, text: str) -> ChatMessage:
        return cls(role=role, parts=(TextPart(text),))

    @property
    def images(self) -> list[EncodedImage]:
        return [p.image for p in self.parts if isinstance(p, ImagePart)]

    @property
    def joined_text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True)
class ToolSpec:
    """A tool as declared to an API with native tool calling (JSON-schema parameters)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class NativeToolCall:
    """A structured tool call returned by an API (``arguments`` is the raw JSON string).

    ``id`` names the call when it is replayed in a later request; the agent assigns it
    (deterministically, per round), so it takes no part in equality.
    """

    name: str
    arguments: str
    id: str = field(default="", compare=False)


@dataclass
class TokenUsage:
    """Token counts; summed across calls with ``+``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
        }


@dataclass(frozen=True)
class ChatResponse:
    """What a :class:`~sam3_agent.backends.base.ChatModel` returns for one request.

    Attributes:
        text: the visible reply (may contain ``<think>`` and ``<tool>`` tags).
        reasoning: a separate reasoning channel, when the API has one (kept for the trace).
        usage: tokens of this one call (``calls`` = 1).
        finish_reason: ``"stop"``, ``"length"`` (cut off by the token limit), ``"tool_calls"``.
        tool_calls: structured calls when native tool calling is on; empty otherwise.
        cached: True when served from the response cache (no tokens were spent).
    """

    text: str
    usage: TokenUsage = field(default_factory=lambda: TokenUsage(calls=1))
    reasoning: str | None = None
    finish_reason: str = "stop"
    tool_calls: tuple[NativeToolCall, ...] = ()
    cached: bool = False
