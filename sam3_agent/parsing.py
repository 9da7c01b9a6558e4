"""Reading the model's replies: the ``<tool>{json}</tool>`` tag protocol and verdicts.

Everything here is a pure function of the reply text. A reply that breaks the protocol is
not an exception: it yields a :class:`ParsedReply` whose ``mistake`` names what is wrong,
and the agent sends that back to the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from sam3_agent.messages import NativeToolCall

TOOL_OPEN, TOOL_CLOSE = "<tool>", "</tool>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_VERDICT = re.compile(r"<verdict>(.*?)</verdict>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model wrote it: a name and its raw JSON parameters."""

    name: str
    parameters: dict[str, Any]

    def to_tag(self) -> str:
        payload = json.dumps({"name": self.name, "parameters": self.parameters}, ensure_ascii=False)
        return f"{TOOL_OPEN}{payload}{TOOL_CLOSE}"


@dataclass(frozen=True)
class ParsedReply:
    """One reply, read.

    Attributes:
        stored_text: the reply as it is kept in the conversation: everything after the first
            complete tool call is cut.
        cut: the text that was cut (a second tool call, say), or None.
        thinking: text inside ``<think>`` (or before a lone ``</think>``), for the trace.
        call: the first tool call, or None when there is a mistake.
        mistake: the kind of protocol mistake (``no_tool``, ``unclosed_tool``, ``truncated``,
            ``invalid_json``), or None.
        detail: specifics of the mistake for the corrective message (e.g. the JSON error).
    """

    stored_text: str
    call: ToolCall | None = None
    cut: str | None = None
    thinking: str | None = None
    mistake: str | None = None
    detail: str = ""


def _thinking_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of reasoning in ``text``, tags included.

    Reasoning is each ``<think>...</think>`` block (an unclosed one runs to the end), and
    everything before a leading lone ``</think>`` (chat templates that open the block in
    the prompt). Tool tags inside reasoning are never executed.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    first_open, first_close = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        pos = first_close + len(THINK_CLOSE)
        spans.append((0, pos))
    while (open_at := text.find(THINK_OPEN, pos)) != -1:
        close_at = text.find(THINK_CLOSE, open_at)
        end = len(text) if close_at == -1 else close_at + len(THINK_CLOSE)
        spans.append((open_at, end))
        pos = end
    return spans


def _thinking_text(text: str, spans: list[tuple[int, int]]) -> str | None:
    parts = []
    for start, end in spans:
        chunk = text[start:end]
        for tag in (THINK_OPEN, THINK_CLOSE):
            chunk = chunk.replace(tag, "")
        parts.append(chunk.strip())
    return "\n".join(parts) if parts else None


def _find_outside(text: str, needle: str, start: int, spans: list[tuple[int, int]]) -> int:
    """First index of ``needle`` at or after ``start`` that is not inside a span."""
    while (at := text.find(needle, start)) != -1:
        inside = next((end for s, end in spans if s <= at < end), None)
        if inside is None:
            return at
        start = inside
    return -1


def parse_reply(text: str, *, truncated: bool = False) -> ParsedReply:
    """Find the first tool call after the reasoning and parse its JSON.

    ``truncated`` says the backend stopped at its token limit; it only changes the wording
    of the mistake when no complete call is found.
    """
    spans = _thinking_spans(text)
    thinking = _thinking_text(text, spans)
    open_at = _find_outside(text, TOOL_OPEN, 0, spans)
    if open_at == -1:
        if truncated:
            return ParsedReply(text, thinking=thinking, mistake="truncated")
        return ParsedReply(text, thinking=thinking, mistake="no_tool")
    close_at = text.find(TOOL_CLOSE, open_at)
    if close_at == -1:
        kind = "truncated" if truncated else "unclosed_tool"
        return ParsedReply(text, thinking=thinking, mistake=kind)
    end = close_at + len(TOOL_CLOSE)
    stored, rest = text[:end], text[end:]
    cut = rest if rest.strip() else None
    payload = text[open_at + len(TOOL_OPEN) : close_at].strip()
    fenced = _FENCE.match(payload)
    if fenced:
        payload = fenced.group(1)
    call, problem = _decode_call(payload)
    if call is None:
        return ParsedReply(
            stored, cut=cut, thinking=thinking, mistake="invalid_json", detail=problem
        )
    return ParsedReply(stored, call=call, cut=cut, thinking=thinking)


def parse_native(
    text: str, calls: tuple[NativeToolCall, ...], *, truncated: bool = False
) -> ParsedReply:
    """The same reading for structured (native) tool calls: only the first is executed."""
    if not calls:
        return parse_reply(text, truncated=truncated)
    first, rest = calls[0], calls[1:]
    cut = "".join(f"{c.name}({c.arguments})" for c in rest) or None
    thinking = _thinking_text(text, _thinking_spans(text))
    try:
        arguments = json.loads(first.arguments) if first.arguments.strip() else {}
    except json.JSONDecodeError as e:
        stored = f"{text}{TOOL_OPEN}{first.arguments}{TOOL_CLOSE}"
        return ParsedReply(
            stored, cut=cut, thinking=thinking, mistake="invalid_json", detail=f"{e.msg} at {e.pos}"
        )
    if not isinstance(arguments, dict):
        arguments = {"_": arguments}
    call = ToolCall(first.name, arguments)
    return ParsedReply(f"{text}{call.to_tag()}", call=call, cut=cut, thinking=thinking)


def _decode_call(payload: str) -> tuple[ToolCall | None, str]:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as e:
        return None, f"{e.msg} at position {e.pos}"
    if not isinstance(data, dict):
        return None, "it is not a JSON object"
    extra = sorted(set(data) - {"name", "parameters"})
    if extra:
        return None, f"unexpected keys {extra}; only 'name' and 'parameters' are allowed"
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return None, "'name' must be a non-empty string"
    params = data.get("parameters", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return None, "'parameters' must be a JSON object"
    return ToolCall(name, params), ""


Verdict = Literal["accept", "reject"]


def parse_verdict(text: str) -> Verdict | None:
    """The checker's verdict: the last ``<verdict>`` tag after any reasoning.

    Case-insensitive and tolerant of extra words inside the tag (``<verdict>I accept
    it.</verdict>``) as long as exactly one of accept/reject is named. None when unclear.
    """
    spans = _thinking_spans(text)
    outside = "".join(text[a:b] for a, b in _gaps(spans, len(text)))
    tags = _VERDICT.findall(outside)
    if not tags:
        return None
    words = set(re.findall(r"[a-z]+", tags[-1].lower()))
    accept = bool(words & {"accept", "accepted", "accepts"})
    reject = bool(words & {"reject", "rejected", "rejects"})
    if accept == reject:
        return None
    return "accept" if accept else "reject"


def _gaps(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    gaps, pos = [], 0
    for start, end in spans:
        gaps.append((pos, start))
        pos = end
    gaps.append((pos, length))
    return gaps
