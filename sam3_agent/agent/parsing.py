"""Reading the model's replies (the ``<tool>{json}</tool>`` protocol, verdicts): pure
functions; a reply that breaks the protocol yields a :class:`ParsedReply` naming the mistake."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from sam3_agent.values.messages import NativeToolCall
from sam3_agent.values.text import echo_list

TOOL_OPEN, TOOL_CLOSE = "<tool>", "</tool>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_DECODER = json.JSONDecoder()
# Our own nesting limit keeps the outcome independent of the interpreter's recursion limit.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_VERDICT = re.compile(r"<verdict>(.*?)</verdict>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    parameters: dict[str, Any]

    def to_tag(self) -> str:
        """The call in tag form; parameters too deep or large to write back become ``{}``."""
        try:
            payload = json.dumps(
                {"name": self.name, "parameters": self.parameters}, ensure_ascii=False
            )
        except (TypeError, ValueError, RecursionError):
            payload = json.dumps({"name": self.name, "parameters": {}}, ensure_ascii=False)
        return f"{TOOL_OPEN}{payload}{TOOL_CLOSE}"


@dataclass(frozen=True)
class ParsedReply:
    """One reply, read: ``stored_text`` is kept, the text after the first complete call is
    ``cut``; ``mistake`` names a broken reply (``detail`` for ``invalid_json``); ``ignored`` is
    text after the call's JSON value; ``native_call`` is the call as replayed later."""

    stored_text: str
    call: ToolCall | None = None
    cut: str | None = None
    thinking: str | None = None
    mistake: str | None = None
    detail: str = ""
    ignored: str | None = None
    native_call: NativeToolCall | None = None


def _thinking_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of reasoning, tags included: each ``<think>`` block (an unclosed
    one runs to the end) and all before a leading lone ``</think>``."""
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
    parts = [text[a:b].replace(THINK_OPEN, "").replace(THINK_CLOSE, "").strip() for a, b in spans]
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
    """The first tool call after the reasoning; ``truncated`` (the token limit was hit) only
    names the mistake when no complete call is found."""
    spans = _thinking_spans(text)
    thinking = _thinking_text(text, spans)
    open_at = _find_outside(text, TOOL_OPEN, 0, spans)
    if open_at == -1:
        kind = "truncated" if truncated else "no_tool" if text.strip() else "empty_reply"
        return ParsedReply(text, thinking=thinking, mistake=kind)
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
    decoded = decode_json(payload)
    call, problem = (None, decoded.problem) if decoded.problem else _as_call(decoded.value)
    if call is None:
        return ParsedReply(
            stored, cut=cut, thinking=thinking, mistake="invalid_json", detail=problem
        )
    return ParsedReply(stored, call=call, cut=cut, thinking=thinking, ignored=decoded.ignored)


def parse_native(
    text: str, calls: tuple[NativeToolCall, ...], *, truncated: bool = False, call_id: str = ""
) -> ParsedReply:
    """The same for native tool calls (only the first runs); ``call_id`` replaces the API's
    id, which differs from run to run and would defeat the response cache."""
    if not calls:
        return parse_reply(text, truncated=truncated)
    first, rest = calls[0], calls[1:]
    cut = "".join(f"{c.name}({c.arguments})" for c in rest) or None
    thinking = _thinking_text(text, _thinking_spans(text))
    decoded = decode_json(first.arguments.strip() or "{}")
    if decoded.problem:
        return ParsedReply(
            f"{text}{TOOL_OPEN}{first.arguments}{TOOL_CLOSE}",
            cut=cut,
            thinking=thinking,
            mistake="invalid_json",
            detail=decoded.problem,
            native_call=NativeToolCall(first.name, "{}", id=call_id),
        )
    arguments = decoded.value
    replay = NativeToolCall(first.name, _encode(arguments), id=call_id)
    if not isinstance(arguments, dict):
        arguments = {"_": arguments}
    call = ToolCall(first.name, arguments)
    return ParsedReply(
        f"{text}{call.to_tag()}",
        call=call,
        cut=cut,
        thinking=thinking,
        ignored=decoded.ignored,
        native_call=replay,
    )


@dataclass(frozen=True)
class Decoded:
    """The first JSON value of a text, or the ``problem``; ``ignored``: text after it."""

    value: Any = None
    problem: str = ""
    ignored: str | None = None


def decode_json(payload: str) -> Decoded:
    """Decode the first JSON value of ``payload`` (a stray ``}`` after it is only ignored);
    never raises: every failure becomes a short ``problem``."""
    if _nesting_depth(payload) > MAX_JSON_DEPTH:
        return Decoded(problem="it is nested too deeply to read")
    try:
        value, end = _DECODER.raw_decode(payload)
    except json.JSONDecodeError as e:
        return Decoded(problem=f"{e.msg} at position {e.pos}")
    except RecursionError:
        return Decoded(problem="it is nested too deeply to read")
    except ValueError:
        # Python refuses integers of more than 4,300 digits (int_max_str_digits).
        return Decoded(problem="it holds a number with more digits than can be read")
    rest = payload[end:]
    return Decoded(value=value, ignored=rest if rest.strip() else None)


def _nesting_depth(payload: str) -> int:
    """The deepest bracket nesting outside JSON strings (an upper bound for invalid JSON)."""
    if payload.count("[") + payload.count("{") <= MAX_JSON_DEPTH:
        return 0
    depth = deepest = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", payload)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _encode(value: Any) -> str:
    """``value`` as JSON for replaying a call; ``{}`` when it cannot be written back."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def _as_call(data: Any) -> tuple[ToolCall | None, str]:
    if not isinstance(data, dict):
        return None, "it is not a JSON object"
    extra = sorted(set(data) - {"name", "parameters"})
    if extra:
        keys = ", ".join(repr(k) for k in echo_list(extra))
        return None, f"unexpected keys {keys}; only 'name' and 'parameters' are allowed"
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, "'name' must be a non-empty string"
    params = {} if data.get("parameters") is None else data["parameters"]
    if not isinstance(params, dict):
        return None, "'parameters' must be a JSON object"
    return ToolCall(name, params), ""


Verdict = Literal["accept", "reject", "uncertain"]  # uncertain: the video checker only

_FRAMES = re.compile(r"<frames>\s*(\d{1,9})\s*(?:-|to|–|\.\.)\s*(\d{1,9})\s*</frames>", re.I)


def parse_verdict(text: str, *, allow_uncertain: bool = False) -> Verdict | None:
    """The last ``<verdict>`` tag outside reasoning, if it names exactly one verdict
    (case-insensitive, extra words allowed); None when unclear."""
    tags = _VERDICT.findall(_outside_thinking(text))
    if not tags:
        return None
    words = set(re.findall(r"[a-z]+", tags[-1].lower()))
    named: list[Verdict] = []
    if words & {"accept", "accepted", "accepts"}:
        named.append("accept")
    if words & {"reject", "rejected", "rejects"}:
        named.append("reject")
    if allow_uncertain and words & {"uncertain", "unsure", "undecided"}:
        named.append("uncertain")
    return named[0] if len(named) == 1 else None


def parse_frame_range(text: str) -> tuple[int, int] | None:
    """The last ``<frames>A-B</frames>`` outside reasoning as ``(min, max)``, or None."""
    found = _FRAMES.findall(_outside_thinking(text))
    if not found:
        return None
    a, b = (int(v) for v in found[-1])
    return (a, b) if a <= b else (b, a)


def _outside_thinking(text: str) -> str:
    spans = _thinking_spans(text)
    starts, ends = [s for s, _ in spans] + [len(text)], [0] + [e for _, e in spans]
    return "".join(text[a:b] for a, b in zip(ends, starts, strict=True))
