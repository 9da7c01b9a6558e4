"""``trace.jsonl``: one record per model call (``main``, ``check``, ``digest``), and the
images they reference."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.agent import rundir
from sam3_agent.values.files import atomic_write_bytes, json_text, safe_name, utf8
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart

if TYPE_CHECKING:
    from sam3_agent.agent.context import Context, Tokens
    from sam3_agent.agent.context.summary import DigestCall
    from sam3_agent.agent.parsing import ParsedReply
    from sam3_agent.agent.steps import ActionStep
    from sam3_agent.values.messages import ChatResponse


class Trace:
    """``trace.jsonl`` and the files it references, each written once; with
    ``directory=None`` nothing is written."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._written: set[str] = set()
        self._lock = threading.Lock()
        if directory is not None:
            (directory / rundir.IMAGES_DIR).mkdir(parents=True, exist_ok=True)
            (directory / rundir.TRACE).write_text("")

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def save_text(self, name: str, text: str) -> str:
        name = safe_name(name)
        if self.directory is not None and name not in self._written:
            atomic_write_bytes(self.directory / name, utf8(text))
            self._written.add(name)
        return name

    def save_image(self, image: EncodedImage) -> str:
        rel = f"{rundir.IMAGES_DIR}/{safe_name(image.name)}"
        if self.directory is not None and rel not in self._written:
            atomic_write_bytes(self.directory / rel, image.data)
            self._written.add(rel)
        return rel

    def messages(
        self, messages: Sequence[ChatMessage], *, system_ref: str | None = None
    ) -> list[dict[str, Any]]:
        """The context as sent, JSON-ready: images and the system prompt by file."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "system" and system_ref is not None:
                out.append({"role": "system", "content": [{"type": "file", "file": system_ref}]})
                continue
            content: list[dict[str, Any]] = []
            for part in m.parts:
                if isinstance(part, ImagePart):
                    content.append({"type": "image", "file": self.save_image(part.image)})
                elif isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
            entry: dict[str, Any] = {"role": m.role, "content": content}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
                ]
            if m.tool_call_id is not None:
                entry["tool_call_id"] = m.tool_call_id
            out.append(entry)
        return out

    def record(self, record: dict[str, Any]) -> None:
        if self.directory is None:
            return
        line = json_text(record) + "\n"
        with self._lock, open(self.directory / rundir.TRACE, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()


def main_record(
    trace: Trace,
    *,
    context: Context,
    response: ChatResponse,
    parsed: ParsedReply,
    step: ActionStep,
    tokens: Tokens,
    per_message: list[int],
    token_source: str,
    latency_s: float = 0.0,
    round_s: float = 0.0,
) -> dict[str, Any]:
    """The record of one main round (saves the images it references)."""
    return {
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
            "image": (
                trace.save_image(step.observation.image)
                if step.observation.image is not None
                else None
            ),
        },
        "usage": response.usage.to_dict(),
        "tokens_estimate": {**tokens.to_dict(), "per_message": per_message, "source": token_source},
        "context_policy": context.eviction.to_dict() if context.eviction is not None else None,
        "cached": response.cached,
        "latency_s": round(latency_s, 4),  # the MLLM call
        "round_s": round(round_s, 4),  # the call and the tool, checks included
    }


def digest_record(
    trace: Trace, *, round_number: int, call: DigestCall, tokens: Tokens
) -> dict[str, Any]:
    """The record of one call a context policy made on its own."""
    return {
        "kind": "digest",
        "round": round_number,
        "rounds_condensed": list(call.rounds),
        "blocking": call.blocking,
        "context": trace.messages(call.messages),
        "reply": call.response.text,
        "usage": call.response.usage.to_dict(),
        "tokens_estimate": tokens.to_dict(),
        "latency_s": round(call.latency_s, 4),
    }
