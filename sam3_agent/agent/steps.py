"""The agent's history as typed steps; a context policy derives the chat messages from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from sam3_agent.agent.parsing import ParsedReply, ToolCall
from sam3_agent.values.detections import Candidates
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    NativeToolCall,
    Part,
    TextPart,
)
from sam3_agent.values.text import echo

if TYPE_CHECKING:
    from sam3_agent.agent.prompts import PromptSet

StepKind = Literal["segment", "examine", "keep", "final", "correction"]
"""``segment``/``examine``/``keep``: an executed segment_phrase/examine_each_mask/keep_masks;
``final``: the tool that ended the session; ``correction``: a refused or unreadable reply."""


class ToolMistake(Exception):
    """A mistake the model can fix. ``str(e)`` is the corrective message sent back to it."""


Answer = Candidates  # masks in an image, or mask tracks through a video

C = TypeVar("C", bound=Candidates)


@dataclass(frozen=True)
class Final(Generic[C]):
    """The session's answer: ``masks`` with the selected detections (or tracks), or ``no_mask``."""

    status: Literal["masks", "no_mask"]
    detections: C


@dataclass(frozen=True)
class Observation:
    """The user message that answers one reply. ``image_dropped_text`` stands in for a
    withheld ``image`` (a newer one is shown); ``image_gone_text`` when no masks are selectable."""

    text: str
    image: EncodedImage | None = None
    image_dropped_text: str = ""
    image_gone_text: str = ""

    def _stand_in(self, *, with_image: bool, masks_gone: bool) -> str:
        """The text shown in place of a withheld image ("" when shown, or none)."""
        if self.image is None or with_image:
            return ""
        return self.image_gone_text if masks_gone else self.image_dropped_text

    def message(self, *, with_image: bool, masks_gone: bool = False) -> ChatMessage:
        parts: list[Part] = []
        if self.image is not None and with_image:
            parts.append(ImagePart(self.image))
        elif stand_in := self._stand_in(with_image=with_image, masks_gone=masks_gone):
            parts.append(TextPart(stand_in + "\n"))
        parts.append(TextPart(self.text))
        return ChatMessage("user", tuple(parts))

    def tool_messages(
        self,
        call: NativeToolCall,
        *,
        with_image: bool,
        prompts: PromptSet,
        masks_gone: bool = False,
    ) -> list[ChatMessage]:
        """A ``tool`` message with the text, then a ``user`` message with the image when shown
        (OpenAI tool messages take text only)."""
        stand_in = self._stand_in(with_image=with_image, masks_gone=masks_gone)
        text = f"{stand_in}\n{self.text}" if stand_in else self.text
        messages = [ChatMessage("tool", (TextPart(text),), tool_call_id=call.id)]
        if self.image is not None and with_image:
            note = prompts.feedback("tool_result_image", name=call.name)
            messages.append(ChatMessage("user", (ImagePart(self.image), TextPart(note))))
        return messages


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call (or a refused reply) gave; ``final`` when it ended the session."""

    kind: StepKind
    observation: Observation
    final: Final[Any] | None = None
    phrase: str | None = None


@dataclass(frozen=True)
class TaskStep:
    """The request: the raw image (downscaled for the model) and the user's query."""

    query: str
    image: EncodedImage


@dataclass(frozen=True)
class ActionStep:
    """One main round (``round`` 1-based): the reply, cut after its first tool call (with
    ``native_call``, the visible text only), and the observation answering it."""

    round: int
    reply: str
    kind: StepKind
    observation: Observation
    call: ToolCall | None = None
    phrase: str | None = None
    native_call: NativeToolCall | None = None

    def messages(
        self, *, with_image: bool, prompts: PromptSet, masks_gone: bool = False
    ) -> tuple[ChatMessage, ...]:
        """The round as chat messages: ``(assistant, user)`` for tags; for a native call the
        assistant's call, the ``tool`` answer and a ``user`` image message when shown."""
        if self.native_call is None:
            return ChatMessage.text("assistant", self.reply), self.observation.message(
                with_image=with_image, masks_gone=masks_gone
            )
        text = (TextPart(self.reply),) if self.reply else ()
        assistant = ChatMessage("assistant", text, tool_calls=(self.native_call,))
        answer = self.observation.tool_messages(
            self.native_call, with_image=with_image, prompts=prompts, masks_gone=masks_gone
        )
        return (assistant, *answer)


def current_masks_index(steps: Sequence[ActionStep]) -> int | None:
    """Index of the latest mask-changing step, if it shows an image of selectable masks;
    None when no masks are selectable (then no image of masks may be shown)."""
    for i in range(len(steps) - 1, -1, -1):
        if steps[i].kind in ("segment", "examine"):  # it replaced the current masks
            return i if steps[i].observation.image is not None else None
    return None


REPLAY_LIMIT = 2000  # characters of a refused reply replayed later (the trace keeps all)


def round_step(
    round_number: int, response: ChatResponse, parsed: ParsedReply, outcome: ToolOutcome
) -> ActionStep:
    """The round as the history keeps it; a refused reply cut to :data:`REPLAY_LIMIT` chars,
    a native call that long replayed with ``{}`` arguments (they must stay valid JSON)."""
    reply = response.text if parsed.native_call is not None else parsed.stored_text
    call = parsed.native_call
    if outcome.kind == "correction":
        if call is not None and len(call.arguments) + len(call.name) > REPLAY_LIMIT:
            call = NativeToolCall(echo(call.name), "{}", id=call.id)
        reply = echo(reply, REPLAY_LIMIT)
    return ActionStep(
        round=round_number,
        reply=reply,
        kind=outcome.kind,
        observation=outcome.observation,
        call=parsed.call,
        phrase=outcome.phrase,
        native_call=call,
    )
