"""``hierarchical``: the context in zones with token budgets.

**pinned** (system prompt, request, tried phrases, the selectable masks' round), **working**
(the latest search onwards, in full), **archive** (one line per older round, built without a
model call, its own budget :data:`ARCHIVE_SHARE`), **reserve** (the reply). Past the
watermark rounds move to the archive oldest first; those of the latest search only when the
hard limit requires. No state between calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sam3_agent.agent.context.policy import BudgetedPolicy, longest_tried_note
from sam3_agent.agent.context.sam3 import anchor_index
from sam3_agent.agent.context.types import Costs, Decision, Evicted, History, tried_before
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.steps import ActionStep

ARCHIVE_SHARE = 0.2
"""Share of the budget's limit the archive lines may use."""

NOTE_OVERHEAD = 80
"""Tokens of the fixed wording around the tried-phrases note and the archive (upper bound)."""


def archive_line(step: ActionStep) -> str:
    """One line standing for ``step``: what was asked and what came back, first sentence;
    for an examine round the first two (the verdict counts, then which masks were accepted
    by their numbers before the check, which a later selection may need)."""
    sentences = step.observation.text.split(". ")
    if step.kind == "examine":
        result = ". ".join(s.strip() for s in sentences[:2]).strip().rstrip(".")
        return f"round {step.round}: {result}."
    result = sentences[0].strip().rstrip(".")
    if step.kind == "segment":
        return f"round {step.round}: {result}."
    return f"round {step.round}: a mistake was corrected: {result}."


def archive_note(lines: Sequence[str], prompts: PromptSet) -> str:
    return prompts.render("context_archive", lines=list(lines)) if lines else ""


class HierarchicalPolicy(BudgetedPolicy):
    """Zones with budgets and a watermark. Stateless."""

    name = "hierarchical"

    def pinned_note(self, costs: Costs) -> int:
        # Pinned: the protected rounds and the note naming every other phrase tried.
        return longest_tried_note(costs)

    def select(self, history: History, costs: Costs) -> Decision:
        steps = history.steps
        anchor = anchor_index(steps)
        core_start = 0 if anchor is None else anchor
        everything = list(range(len(steps)))
        protected = costs.protected()
        kept = set(everything)
        archived: list[int] = []
        lines = {i: archive_line(steps[i]) for i in everything}
        line_cost = {i: self.counter.text(lines[i]) + 2 for i in everything}
        limit, watermark = self.budget.limit, self.budget.watermark_tokens

        def without_archive() -> int:
            """Pinned and working zones, counted exactly: what the archive must leave room for."""
            return costs.total(sorted(kept)) + costs.note_tokens(tried_before(steps, sorted(kept)))

        def shown_lines() -> list[int]:
            """The archived rounds whose lines fit the archive's own budget, newest kept."""
            room = min(int(limit * ARCHIVE_SHARE), limit - without_archive() - NOTE_OVERHEAD)
            shown = sorted(archived)
            while shown and sum(line_cost[i] for i in shown) > room:
                shown.pop(0)
            return shown

        def total() -> int:
            shown = shown_lines()
            tried = tried_before(steps, sorted(kept))
            return costs.total(sorted(kept)) + self._note_cost(
                tried, [lines[i] for i in shown], line_cost=[line_cost[i] for i in shown]
            )

        reasons: dict[int, str] = {}

        def archive(rounds: Sequence[int], fits: Callable[[], bool], reason: str) -> None:
            """Move ``rounds`` to the archive, in order, until ``fits()``."""
            for i in rounds:
                if fits():
                    break
                if i in protected:
                    continue
                kept.discard(i)
                archived.append(i)
                reasons[i] = reason

        # Older rounds go first, down to the watermark, the archive counted as it will be
        # sent. The latest search's rounds go only when they, the pinned zone and the note
        # of tried phrases exceed the hard limit: the archive yields to them, not they to it.
        archive(
            everything[:core_start], lambda: total() <= watermark, "watermark: moved to archive"
        )
        archive(
            everything[core_start:],
            lambda: without_archive() <= limit,
            "budget: working round moved to archive",
        )
        shown = shown_lines()
        for i in sorted(set(archived) - set(shown)):
            reasons[i] = "archive over its budget: line dropped"
        evicted = [Evicted(steps[i].round, reason) for i, reason in reasons.items()]
        tried = tried_before(steps, sorted(kept))
        note = archive_note([lines[i] for i in shown], history.prompts)
        notes = [note] if note else []
        notes_tokens = costs.note_tokens(tried, notes)
        working = [i for i in kept if i not in protected]
        zones = {
            "pinned": costs.head
            + costs.note_tokens(tried)
            + sum(costs.rounds[i] for i in protected),
            "working": sum(costs.rounds[i] for i in working),
            "archive": notes_tokens - costs.note_tokens(tried),
            "reserve": self.budget.reserve_tokens,
        }
        return Decision(sorted(kept), tried, notes, evicted, zones=zones)

    def _note_cost(
        self, tried: Sequence[str], lines: Sequence[str], line_cost: Sequence[int] | None = None
    ) -> int:
        if not tried and not lines:
            return 0
        phrases = sum(self.counter.text(p) + 3 for p in tried)
        archive = (
            sum(line_cost)
            if line_cost is not None
            else sum(self.counter.text(line) + 2 for line in lines)
        )
        return NOTE_OVERHEAD + phrases + archive
