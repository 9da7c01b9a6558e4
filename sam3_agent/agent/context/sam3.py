"""``sam3`` (the default): the system prompt, the request (naming the phrases tried before),
the latest executed ``segment_phrase`` round and after it only the latest examine round and
corrective exchange; a budget too small for these drops them oldest first."""

from __future__ import annotations

from collections.abc import Sequence

from sam3_agent.agent.context.policy import BudgetedPolicy, evict_in_order
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
# System prompt and request, two per kept round (the reply and its answer), and with native
# tool calls the user message carrying the image after the round showing the masks (9).
MAX_MESSAGES = 2 + 2 * MAX_KEPT_ROUNDS + 1


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
    for kind in ("examine", "keep", "correction"):
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
    return render(History(system_prompt, task, steps), sam3_decision(steps))


class Sam3Policy(BudgetedPolicy):
    """Three-part pruning under a token budget. Stateless."""

    name = "sam3"

    pins_tried_note = True

    def select(self, history: History, costs: Costs) -> Decision:
        chosen = sam3_decision(history.steps)
        longest = self.pinned_note(costs)
        kept, more = evict_in_order(
            costs, chosen.kept, sorted(chosen.kept), self.budget.limit, "budget", longest
        )
        # A search round left for the budget: its phrase joins the note.
        tried = tried_before(history.steps, kept) if more else chosen.tried_phrases
        return Decision(kept, tried, evicted=[*chosen.evicted, *more])
