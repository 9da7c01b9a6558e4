"""Chat messages as backends receive them, and what a backend sends back. The response cache
and the checkpoint journal share :func:`request_key` and the response's JSON form."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass, field
from typing import Any, Literal

from sam3_agent.values.images import EncodedImage

Role = Literal["system", "user", "assistant", "tool"]  # tool: a native tool call's result


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    image: EncodedImage


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ChatMessage:
    """One message. A ``tool`` message answers the call ``tool_call_id`` and is text only
    (OpenAI tool messages cannot hold images: an image result follows as a user message)."""

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
    """A structured tool call (``arguments``: the raw JSON string). The agent assigns ``id``
    deterministically per round, so it takes no part in equality."""

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
        return TokenUsage(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def to_dict(self) -> dict[str, int]:
        p, c, n = astuple(self)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "calls": n}


@dataclass(frozen=True)
class ChatResponse:
    """What a ChatModel returns for one request. ``reasoning``: a separate channel, where the
    API has one; ``cached``: served from the response cache (no tokens spent)."""

    text: str
    usage: TokenUsage = field(default_factory=lambda: TokenUsage(calls=1))
    reasoning: str | None = None
    finish_reason: str = "stop"
    tool_calls: tuple[NativeToolCall, ...] = ()
    cached: bool = False


REQUEST_KEY_FORMAT = 1  # part of every key: bump it when keys change meaning (caches miss)


def request_key(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] | None = None,
    *,
    model: str = "",
    generation_params: dict[str, Any] | None = None,
) -> str:
    """The sha256 hex digest of one request (images by their bytes' sha256), stable across
    processes."""
    payload = {
        "format": REQUEST_KEY_FORMAT,
        "model": model,
        "params": generation_params or {},
        "tools": None if tools is None else [asdict(t) for t in tools],
        "messages": [_message_key(m) for m in messages],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate in a reply still gives a key (valid text is unchanged).
    return hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


def _message_key(message: ChatMessage) -> dict[str, Any]:
    parts = [
        {"text": p.text} if isinstance(p, TextPart) else {"image_sha256": p.image.sha256}
        for p in message.parts
    ]
    key: dict[str, Any] = {"role": message.role, "parts": parts}
    # Only native tool-call replays carry these; other keys stay as they were.
    if message.tool_calls:
        key["tool_calls"] = [[c.id, c.name, c.arguments] for c in message.tool_calls]
    if message.tool_call_id is not None:
        key["tool_call_id"] = message.tool_call_id
    return key


def response_to_json(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "usage": list(astuple(response.usage)),
        "reasoning": response.reasoning,
        "finish_reason": response.finish_reason,
        "tool_calls": [asdict(c) for c in response.tool_calls],
        "cached": response.cached,
    }


def response_from_json(doc: dict[str, Any]) -> ChatResponse:
    """Also reads older cache records (no usage, ``cached`` or tool-call ids): what is
    missing takes its default."""
    prompt, completion, calls = doc.get("usage", (0, 0, 1))
    reasoning = doc.get("reasoning")
    return ChatResponse(
        text=_text_field(doc["text"], "text"),
        usage=TokenUsage(int(prompt), int(completion), int(calls)),
        reasoning=None if reasoning is None else _text_field(reasoning, "reasoning"),
        finish_reason=_text_field(doc.get("finish_reason", "stop"), "finish_reason"),
        tool_calls=tuple(
            NativeToolCall(
                _text_field(c["name"], "name"),
                _text_field(c["arguments"], "arguments"),
                _text_field(c.get("id", ""), "id"),
            )
            for c in doc.get("tool_calls", ())
        ),
        cached=bool(doc.get("cached", False)),
    )


def _text_field(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value
