"""The agent's history as typed steps; chat messages are derived from them.

As in smolagents, the conversation is never stored as raw messages: each round is an
:class:`ActionStep`, and :mod:`sam3_agent.pruning` turns the steps into the context sent
to the model. Pruning therefore never mutates anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sam3_agent.images import EncodedImage
from sam3_agent.messages import ChatMessage, ImagePart, Part, TextPart
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
    """

    round: int
    reply: str
    kind: StepKind
    observation: Observation
    call: ToolCall | None = None
    phrase: str | None = None

    def messages(self, *, with_image: bool) -> tuple[ChatMessage, ChatMessage]:
        return ChatMessage.text("assistant", self.reply), self.observation.message(
            with_image=with_image
        )
