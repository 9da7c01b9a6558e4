"""The chat-completions wire format: our messages out, the reply's parts back in.

Text goes out as UTF-8, so a lone surrogate a model once wrote (which cannot be encoded)
goes back as U+FFFD; a reply's reasoning channel and tool calls are read whichever way the
server spells them.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from sam3_agent.values.messages import ChatMessage, ImagePart, NativeToolCall, TextPart

logger = logging.getLogger(__name__)


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": wire_text(message.joined_text),
        }
    if message.tool_calls:
        return {
            "role": message.role,
            "content": wire_text(message.joined_text) or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": wire_text(call.name),
                        "arguments": wire_text(call.arguments),
                    },
                }
                for call in message.tool_calls
            ],
        }
    if not message.images:
        # Plain strings for text-only messages: some servers accept nothing else for
        # system and assistant turns.
        return {"role": message.role, "content": wire_text(message.joined_text)}
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": wire_text(part.text)})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": part.image.data_url()}})
    return {"role": message.role, "content": content}


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def wire_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def reasoning_of(message: Any) -> str | None:
    """The separate reasoning channel: vLLM/DeepSeek ``reasoning_content``, or ``reasoning``."""
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key) if key in extra else getattr(message, key, None)
        if isinstance(value, str) and value:
            return value
    return None


def tool_calls_of(message: Any) -> tuple[NativeToolCall, ...]:
    calls = []
    for call in getattr(message, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        if function is None:
            logger.warning("ignoring a non-function tool call of type %r", call.type)
            continue
        calls.append(NativeToolCall(name=function.name, arguments=function.arguments or ""))
    return tuple(calls)
