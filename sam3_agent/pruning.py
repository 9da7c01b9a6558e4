"""Three-part context pruning: a pure function from the history to the messages sent.

1. Always kept: the system prompt and the first user message (raw image + query).
2. Dropped: every round before the anchor.
3. Kept: the anchor, the latest *executed* ``segment_phrase``, and after it only the latest
   ``examine_each_mask`` round and the latest corrective exchange.

The anchor comes from the parsed tool call (:attr:`ActionStep.kind`), never from a text
search, and a refused duplicate phrase is a correction, not an anchor, so the image of the
masks that are still current is never dropped while they stay selectable. Of the kept
rounds only the image of the masks that can still be selected is sent (the latest executed
segment or examine, when it has one); older ones become a line of text, and when no mask is
selectable (all rejected, none found) no image of masks is sent at all. So the context
holds at most two images and at most ``2 + 2 * 3`` messages, however long the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sam3_agent import prompts
from sam3_agent.messages import ChatMessage, ImagePart, TextPart
from sam3_agent.steps import ActionStep, TaskStep, current_masks_index

MAX_KEPT_ROUNDS = 3
MAX_MESSAGES = 2 + 2 * MAX_KEPT_ROUNDS


@dataclass(frozen=True)
class Context:
    """What one MLLM call receives, and what pruning left out (for the trace)."""

    messages: list[ChatMessage]
    kept_rounds: list[int]
    dropped_rounds: list[int]
    images_replaced: list[int]
    tried_phrases: list[str]


def anchor_index(steps: Sequence[ActionStep]) -> int | None:
    """Index of the latest executed segment_phrase step, or None."""
    for i in range(len(steps) - 1, -1, -1):
        if steps[i].kind == "segment":
            return i
    return None


def kept_indices(steps: Sequence[ActionStep]) -> list[int]:
    """Indices of the steps part 3 keeps, in chronological order."""
    anchor = anchor_index(steps)
    start = 0 if anchor is None else anchor + 1
    keep = set() if anchor is None else {anchor}
    for kind in ("examine", "correction"):
        latest = next(
            (i for i in range(len(steps) - 1, start - 1, -1) if steps[i].kind == kind), None
        )
        if latest is not None:
            keep.add(latest)
    return sorted(keep)


def build_context(system_prompt: str, task: TaskStep, steps: Sequence[ActionStep]) -> Context:
    """The messages for the next main-conversation call.

    Phrases executed before the anchor are named in a note in the first user message, in
    the order they were tried, so the model knows what failed after its history is gone.
    """
    anchor = anchor_index(steps)
    tried = [s.phrase for s in steps[: anchor or 0] if s.kind == "segment" and s.phrase]
    first_user = ChatMessage(
        "user",
        (
            ImagePart(task.image),
            TextPart(prompts.render("user_task", query=task.query, tried_phrases=tried)),
        ),
    )
    messages = [ChatMessage.text("system", system_prompt), first_user]
    keep = kept_indices(steps)
    with_image = current_masks_index(steps)
    replaced = []
    for i in keep:
        step = steps[i]
        messages.extend(step.messages(with_image=i == with_image, masks_gone=with_image is None))
        if step.observation.image is not None and i != with_image:
            replaced.append(step.round)
    kept_set = set(keep)
    return Context(
        messages=messages,
        kept_rounds=[steps[i].round for i in keep],
        dropped_rounds=[s.round for i, s in enumerate(steps) if i not in kept_set],
        images_replaced=replaced,
        tried_phrases=tried,
    )
