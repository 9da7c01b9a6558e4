"""The agent's history as typed steps; chat messages are derived from them.

As in smolagents, the conversation is never stored as raw messages: each round is an
:class:`ActionStep`, and :mod:`sam3_agent.pruning` turns the steps into the context sent
to the model. Pruning therefore never mutates anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sam3_agent import prompts
from sam3_agent.images import EncodedImage
from sam3_agent.messages import ChatMessage, ImagePart, NativeToolCall, Part, TextPart
from sam3_agent.parsing import ToolCall

StepKind = Literal["segment", "examine", "final", "correction"]
"""``segment``: an executed segment_phrase (a pruning anchor). ``examine``: an executed
examine_each_mask. ``final``: select/report that ended the session. ``correction``: anything
refused or unreadable, answered with a corrective message."""


@dataclass(frozen=True)
class Observation:
    """The user message that answers one reply.

    ``image_dropped_text`` stands in for ``image`` when pruning shows a newer image instead.
    """

    text: str
    image: EncodedImage | None = None
    image_dropped_text: str = ""

    def message(self, *, with_image: bool) -> ChatMessage:
        parts: list[Part] = []
        if self.image is not None:
            if with_image:
                parts.append(ImagePart(self.image))
            elif self.image_dropped_text:
                parts.append(TextPart(self.image_dropped_text + "\n"))
        parts.append(TextPart(self.text))
        return ChatMessage("user", tuple(parts))

    def tool_messages(self, call: NativeToolCall, *, with_image: bool) -> list[ChatMessage]:
        """The answer to a native tool call: a ``tool`` message with the text, then, when the
        image is shown, a ``user`` message holding it (OpenAI tool messages take text only)."""
        text = self.text
        if self.image is not None and not with_image and self.image_dropped_text:
            text = f"{self.image_dropped_text}\n{text}"
        messages = [ChatMessage("tool", (TextPart(text),), tool_call_id=call.id)]
        if self.image is not None and with_image:
            note = prompts.feedback("tool_result_image", name=call.name)
            messages.append(ChatMessage("user", (ImagePart(self.image), TextPart(note))))
        return messages


@dataclass(frozen=True)
class TaskStep:
    """The request: the raw image (downscaled for the model) and the user's query."""

    query: str
    image: EncodedImage


@dataclass(frozen=True)
class ActionStep:
    """One main-conversation round: the model's reply and what came back.

    Attributes:
        round: 1-based number of the MLLM call that produced ``reply``.
        reply: the reply as stored (cut after the first tool call).
        kind: how the round ended (see :data:`StepKind`).
        observation: the answer sent back to the model.
        call: the parsed tool call, None when the reply had none or was unreadable.
        phrase: the phrase, for an executed segment_phrase.
        native_call: with native tool calling, the call as replayed to the API; ``reply``
            is then the reply's visible text and the observation answers as a tool result.
    """

    round: int
    reply: str
    kind: StepKind
    observation: Observation
    call: ToolCall | None = None
    phrase: str | None = None
    native_call: NativeToolCall | None = None

    def messages(self, *, with_image: bool) -> tuple[ChatMessage, ...]:
        """The round as chat messages: the reply, then its answer.

        Tag protocol: ``(assistant, user)``. Native tool calls: an assistant message with
        the structured call, a ``tool`` message answering it by id, and a ``user`` message
        with the image when it is shown.
        """
        if self.native_call is None:
            return ChatMessage.text("assistant", self.reply), self.observation.message(
                with_image=with_image
            )
        text = (TextPart(self.reply),) if self.reply else ()
        assistant = ChatMessage("assistant", text, tool_calls=(self.native_call,))
        return (assistant, *self.observation.tool_messages(self.native_call, with_image=with_image))
