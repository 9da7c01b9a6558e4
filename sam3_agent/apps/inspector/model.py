"""A run directory read back for display, all of it untrusted: a torn record becomes a note, a
wrong type reads as missing, an image outside the run or not JPEG/PNG is not shown."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, cast

from PIL import Image, UnidentifiedImageError

from sam3_agent.agent.context.tokens import counter_for
from sam3_agent.apps.inspector.views import (
    CallView,
    ImageRef,
    MessageView,
    Part,
    RoundView,
    RunView,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_str,
)
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, NativeToolCall, Role, TextPart

_MAGIC = {b"\xff\xd8\xff": "image/jpeg", b"\x89PNG\r\n\x1a\n": "image/png"}  # images shown


class _Loader:
    def __init__(self, directory: Path, model: str) -> None:
        self.directory, self.root = directory, directory.resolve()
        self.images: dict[str, ImageRef] = {}
        self.notes: list[str] = []
        self.prompts: dict[str, str | None] = {}
        # counter_for sees the run's MLLM by its name only: no weights, no endpoint.
        self.counter = counter_for(SimpleNamespace(name=model))

    def read(self, file: str) -> bytes | None:
        """The bytes of ``file``; None when it leaves the run directory or cannot be read."""
        try:
            path = (self.directory / file).resolve()
            if path.is_relative_to(self.root) and path.is_file():
                return path.read_bytes()
        except (OSError, ValueError):  # a NUL byte, a name too long, a loop of links
            pass
        return None

    def image(self, file: str) -> ImageRef:
        if file not in self.images:
            data = self.read(file) or b""
            mime = next((kind for magic, kind in _MAGIC.items() if data.startswith(magic)), None)
            self.images[file] = (
                ImageRef(file, mime, data, *_image_size(data)) if mime else ImageRef(file)
            )
        return self.images[file]

    def prompt(self, file: str) -> str | None:
        if file not in self.prompts:
            data = self.read(file)
            self.prompts[file] = None if data is None else data.decode("utf-8", "replace")
        return self.prompts[file]

    def messages(self, record: dict[str, Any], *, main: bool) -> tuple[MessageView, ...]:
        counted = as_list(as_dict(record, "tokens_estimate"), "per_message")
        context = [m for m in as_list(record, "context") if isinstance(m, dict)]
        use_counted = len(counted) == len(context) and all(
            isinstance(c, int) and not isinstance(c, bool) for c in counted
        )
        views = []
        for i, message in enumerate(context):
            role = as_str(message, "role") or "?"
            parts = tuple(self._part(p) for p in as_list(message, "content") if isinstance(p, dict))
            tokens = counted[i] if use_counted else self.count(role, parts, message)
            zone = _zone(i, role) if main else "call"
            source: Literal["trace", "estimate"] = "trace" if use_counted else "estimate"
            views.append(MessageView(i, role, zone, parts + _native_calls(message), tokens, source))
        return tuple(views)

    def count(self, role: str, parts: tuple[Part, ...], message: dict[str, Any]) -> int:
        """Tokens of one traced message, counted as the agent counts the message it was."""
        sent: list[TextPart | ImagePart] = []
        for part in parts:
            ref = part.image
            if part.kind in ("text", "file"):  # a prompt file counts as the prompt it holds
                text = part.text if part.kind == "text" else self.prompt(part.text) or ""
                sent.append(TextPart(text))
            elif ref and ref.data is not None and ref.mime and ref.width and ref.height:
                mime = cast(Literal["image/jpeg", "image/png"], ref.mime)
                sent.append(
                    ImagePart(EncodedImage(ref.file, ref.data, mime, ref.width, ref.height))
                )
        calls = tuple(
            NativeToolCall(as_str(c, "name"), as_str(c, "arguments"), as_str(c, "id"))
            for c in as_list(message, "tool_calls") if isinstance(c, dict)
        )  # fmt: skip
        answered = message.get("tool_call_id")
        answered = answered if isinstance(answered, str) else None
        rebuilt = ChatMessage(
            cast(Role, role), tuple(sent), tool_calls=calls, tool_call_id=answered
        )
        return self.counter.message(rebuilt).total

    def _part(self, part: dict[str, Any]) -> Part:
        kind = as_str(part, "type")
        if kind == "image":
            return Part("image", image=self.image(as_str(part, "file")))
        if kind == "file":
            return Part("file", text=as_str(part, "file"))
        return Part("text", text=as_str(part, "text"))

    def call(self, record: dict[str, Any], **fields: Any) -> CallView:
        """A check or digest record as a view: what every call record carries, read alike."""
        return CallView(
            messages=self.messages(record, main=False), reply=as_str(record, "reply"),
            reasoning=as_str(record, "reasoning"), usage=as_dict(record, "usage"),
            latency_s=as_float(record, "latency_s"), request_tokens=self.counter.request_overhead,
            **fields,
        )  # fmt: skip


def _native_calls(message: dict[str, Any]) -> tuple[Part, ...]:
    """Native tool calls an assistant message made, and the call a tool message answers."""
    calls = tuple(
        Part("call", text=f"{as_str(c, 'name')}({as_str(c, 'arguments')}) id {as_str(c, 'id')!r}")
        for c in as_list(message, "tool_calls")
        if isinstance(c, dict)
    )
    answered = as_str(message, "tool_call_id")
    return calls + ((Part("call", text=f"answers call id {answered!r}"),) if answered else ())


def _zone(index: int, role: str) -> str:
    """Where a main-context message sits: the system prompt and request are pinned."""
    pinned = (index == 0 and role == "system") or (index <= 1 and role == "user")
    return "pinned" if pinned else "working"


def _image_size(data: bytes) -> tuple[int | None, int | None]:
    try:
        with Image.open(io.BytesIO(data)) as image:
            return int(image.width), int(image.height)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None, None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, json.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


def read_trace(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """The records of ``trace.jsonl``; unreadable lines become ``notes``."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e}") from e
    lines = raw.decode("utf-8", "replace").split("\n")
    torn = lines[-1] != ""  # a kill mid-write leaves a last line without its newline
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if torn and number == len(lines):
                notes.append(f"trace.jsonl line {number} is incomplete (the run was stopped)")
            else:
                notes.append(f"trace.jsonl line {number} is not valid JSON; skipped")
            continue
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            notes.append(f"trace.jsonl line {number} is not a trace record; skipped")
            continue
        records.append(record)
    return records


def load_run(directory: Path) -> RunView:
    """Read a run directory written by ``sam3-agent run`` (or ``eval``'s per-sample output)."""
    if not directory.is_dir():
        raise UserError(f"not a run directory: {directory}")
    trace = directory / "trace.jsonl"
    if not trace.is_file():
        raise UserError(f"no trace.jsonl in {directory}: not a run directory, or a run without one")
    result = _read_json(directory / "result.json")
    session = _read_json(directory / "session.json")
    # The run's MLLM: from result.json, else from the fingerprint of session.json.
    model = as_str(result, "model") or as_str(
        as_dict(as_dict(session, "fingerprint"), "settings"), "model"
    )
    loader = _Loader(directory, model)
    rounds: dict[int, RoundView] = {}
    for record in read_trace(trace, loader.notes):
        kind, number = record["kind"], as_int(record, "round") or 0
        if kind not in ("main", "check", "digest"):
            loader.notes.append(f"a trace record of unknown kind {kind!r} was skipped")
            continue
        view = rounds.setdefault(number, RoundView(number))
        if kind == "main":
            _fill_main(view, record, loader)
        elif kind == "check":
            view.checks.append(_check(record, loader))
        else:
            condensed = [r for r in as_list(record, "rounds_condensed") if isinstance(r, int)]
            title = f"digest of rounds {', '.join(map(str, condensed)) or '?'}"
            extra = {"blocking": record.get("blocking") is True}
            call = loader.call(record, kind="digest", title=title, verdict=None, extra=extra)
            view.digests.append(call)
    for view in rounds.values():
        view.checks.sort(
            key=lambda c: (as_int(c.extra, "mask") or 0, as_int(c.extra, "attempt") or 0)
        )
    state = as_dict(session, "state")
    return RunView(
        directory=directory, rounds=[rounds[n] for n in sorted(rounds)], result=result,
        system_prompt=loader.prompt("system_prompt.txt"),
        checker_prompt=loader.prompt("checker_prompt.txt"),
        committed_round=as_int(state, "round") if session else None,
        ended=bool(as_dict(state, "ending")), notes=loader.notes,
    )  # fmt: skip


def _fill_main(view: RoundView, record: dict[str, Any], loader: _Loader) -> None:
    view.complete, view.messages = True, loader.messages(record, main=True)
    policy = as_dict(record, "context_policy") or as_dict(record, "eviction")
    if policy:
        view.eviction, view.eviction_source = policy, "context_policy"
    elif as_dict(record, "pruning"):
        view.eviction, view.eviction_source = as_dict(record, "pruning"), "pruning"
    view.reply, view.reasoning, view.thinking, view.finish_reason, view.cut = (
        as_str(record, key)
        for key in ("reply", "reasoning", "thinking", "finish_reason", "cut_after_first_tool")
    )
    call, outcome = as_dict(record, "tool_call"), as_dict(record, "outcome")
    view.tool_name = as_str(call, "name") or None
    view.tool_parameters = call.get("parameters") if call else None
    view.outcome_kind, view.outcome_text = as_str(outcome, "kind"), as_str(outcome, "text")
    image = as_str(outcome, "image")
    view.outcome_image = loader.image(image) if image else None
    view.kept = as_list(record, "kept")
    view.usage, view.cached = as_dict(record, "usage"), record.get("cached") is True
    view.latency_s, view.round_s = as_float(record, "latency_s"), as_float(record, "round_s")


def _check(record: dict[str, Any], loader: _Loader) -> CallView:
    mask, attempt = as_int(record, "mask"), as_int(record, "attempt")
    verdict = as_str(record, "verdict") or None
    if record.get("forced_reject") is True:
        verdict = "reject (no clear verdict)"
    title = f"mask {mask if mask is not None else '?'}, attempt {attempt or 1}"
    extra = {"mask": mask, "attempt": attempt}
    return loader.call(record, kind="check", title=title, verdict=verdict, extra=extra)
