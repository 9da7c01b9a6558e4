"""``sam3`` (the default): three-part pruning, a pure function of the history.

Kept: the system prompt, the request, the anchor (the latest *executed* ``segment_phrase``,
read from the parsed call, never from a text search), and after it only the latest
``examine_each_mask`` round and the latest corrective exchange; so at most
:data:`MAX_MESSAGES` messages. Phrases tried before the anchor are named in a note in the
request. A budget too small even for this drops kept rounds other than the selectable
masks', oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence

from sam3_agent.agent.context.policy import BudgetedPolicy, evict_in_order, longest_tried_note
from sam3_agent.agent.context.types import (
    Context,
    Costs,
    Decision,
    Evicted,
    History,
    render,
    tried_before,
)
from sam3_agent.agent.steps import ActionStep, TaskStep

MAX_KEPT_ROUNDS = 3
MAX_MESSAGES = 2 + 2 * MAX_KEPT_ROUNDS + 1
"""System prompt and request, two messages per kept round (the reply and its answer), and
one more with native tool calls: the user message carrying the image after the tool result,
which only the round showing the selectable masks has (9)."""


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


def sam3_decision(steps: Sequence[ActionStep]) -> Decision:
    """The three-part choice, with why each other round was left out."""
    anchor = anchor_index(steps)
    tried = [s.phrase for s in steps[: anchor or 0] if s.kind == "segment" and s.phrase]
    keep = kept_indices(steps)
    kept = set(keep)
    evicted = [
        Evicted(
            s.round,
            "before the latest segment_phrase"
            if anchor is not None and i < anchor
            else "superseded by a later round of its kind",
        )
        for i, s in enumerate(steps)
        if i not in kept
    ]
    return Decision(keep, tried, evicted=evicted)


def build_context(system_prompt: str, task: TaskStep, steps: Sequence[ActionStep]) -> Context:
    """The three-part context with no token budget: a pure function of the steps."""
    decision = sam3_decision(steps)
    messages, replaced = render(History(system_prompt, task, steps), decision)
    kept = set(decision.kept)
    return Context(
        messages=messages,
        kept_rounds=[steps[i].round for i in sorted(kept)],
        dropped_rounds=[s.round for i, s in enumerate(steps) if i not in kept],
        images_replaced=replaced,
        tried_phrases=list(decision.tried_phrases),
    )


class Sam3Policy(BudgetedPolicy):
    """Three-part pruning under a token budget. Stateless."""

    name = "sam3"

    def pinned_note(self, costs: Costs) -> int:
        # Evicting for the budget may add phrases to the note: reckon with the longest note,
        # the one naming every phrase but those of the pinned rounds.
        return longest_tried_note(costs)

    def select(self, history: History, costs: Costs) -> Decision:
        chosen = sam3_decision(history.steps)
        longest = self.pinned_note(costs)
        kept, more = evict_in_order(
            costs, chosen.kept, sorted(chosen.kept), self.budget.limit, "budget", longest
        )
        # A search round left for the budget: its phrase joins the note.
        tried = tried_before(history.steps, kept) if more else chosen.tried_phrases
        return Decision(kept, tried, evicted=[*chosen.evicted, *more])
