"""What the inspector shows of a run: the plain values :func:`.model.load_run` builds and the
renderers receive."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class ImageRef:
    """An image a record refers to. ``data``/``mime`` are None when it cannot be shown."""

    file: str
    mime: str | None = None
    data: bytes | None = None
    width: int | None = None
    height: int | None = None

    @property
    def label(self) -> str:
        size = f" {self.width}x{self.height}" if self.width and self.height else ""
        return f"{self.file}{size}{'' if self.data is not None else ' (not available)'}"


@dataclass(frozen=True)
class Part:
    """One part of a message: text, an image, a prompt file, or a native tool call."""

    kind: Literal["text", "image", "file", "call"]
    text: str = ""
    image: ImageRef | None = None


@dataclass(frozen=True)
class MessageView:
    index: int
    role: str
    zone: str
    parts: tuple[Part, ...]
    tokens: int
    tokens_source: Literal["trace", "estimate"]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if p.kind == "text")


@dataclass(frozen=True)
class CallView:
    """One MLLM call besides the main one: a mask check or a digest."""

    kind: Literal["check", "digest"]
    title: str
    verdict: str | None
    messages: tuple[MessageView, ...]
    reply: str
    reasoning: str
    usage: dict[str, Any]
    latency_s: float | None
    extra: dict[str, Any]
    request_tokens: int = 0  # the request's own framing (the reply's opening), not a message

    @property
    def tokens(self) -> int:
        """The call's prompt tokens as the agent counts them: its messages and the request."""
        return sum(m.tokens for m in self.messages) + self.request_tokens


@dataclass
class RoundView:
    """One main round and its calls; not ``complete`` without the round's main record."""

    number: int
    complete: bool = False
    messages: tuple[MessageView, ...] = ()
    eviction: dict[str, Any] = field(default_factory=dict)
    eviction_source: Literal["context_policy", "pruning", "none"] = "none"
    reply: str = ""
    reasoning: str = ""
    thinking: str = ""
    finish_reason: str = ""
    cut: str = ""
    tool_name: str | None = None
    tool_parameters: Any = None
    outcome_kind: str = ""
    outcome_text: str = ""
    outcome_image: ImageRef | None = None
    kept: list[Any] = field(default_factory=list)
    """The kept set after the round (the extended tools' ``keep_masks``), its records."""
    usage: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    latency_s: float | None = None
    round_s: float | None = None
    checks: list[CallView] = field(default_factory=list)
    digests: list[CallView] = field(default_factory=list)

    @property
    def context_tokens(self) -> int:
        return sum(m.tokens for m in self.messages)

    @property
    def zones(self) -> dict[str, list[MessageView]]:
        """Messages grouped by zone, zones in order of first appearance."""
        grouped: dict[str, list[MessageView]] = {}
        for m in self.messages:
            grouped.setdefault(m.zone, []).append(m)
        return grouped


@dataclass
class RunView:
    """A run directory as the inspector shows it; ``ended``: nothing left to resume."""

    directory: Path
    rounds: list[RoundView]
    result: dict[str, Any] | None
    system_prompt: str | None
    checker_prompt: str | None
    committed_round: int | None
    ended: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def query(self) -> str:
        return as_str(self.result, "query")


# Reading untrusted values: a missing key, a wrong type or a non-dict record reads as missing.


def _get(record: Any, key: str) -> Any:
    return record.get(key) if isinstance(record, dict) else None


def as_str(record: Any, key: str) -> str:
    value = _get(record, key)
    return value if isinstance(value, str) else ""


def as_int(record: Any, key: str) -> int | None:
    value = _get(record, key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(record: Any, key: str) -> float | None:
    value = _get(record, key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def as_dict(record: Any, key: str) -> dict[str, Any]:
    value = _get(record, key)
    return value if isinstance(value, dict) else {}


def as_list(record: Any, key: str) -> list[Any]:
    value = _get(record, key)
    return value if isinstance(value, list) else []
