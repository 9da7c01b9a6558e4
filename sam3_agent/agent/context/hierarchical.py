"""``hierarchical``: zones with token budgets: pinned, working (the latest search onwards),
archive (one line per older round, :data:`ARCHIVE_SHARE`), reserve. Past the watermark rounds
move to the archive oldest first; the latest search's only when the hard limit requires."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.sam3 import anchor_index
from sam3_agent.agent.context.types import Costs, Decision, Evicted, History, tried_before
from sam3_agent.agent.steps import ActionStep

ARCHIVE_SHARE = 0.2
"""Share of the budget's limit the archive lines may use."""

NOTE_OVERHEAD = 80
"""Tokens of the fixed wording around the tried-phrases note and the archive (upper bound)."""


def archive_line(step: ActionStep) -> str:
    """One line standing for ``step``: its result's first sentence (an examine round's first
    two: the verdict counts, then which masks were accepted, which a later selection needs)."""
    sentences = step.observation.text.split(". ")
    if step.kind == "examine":
        result = ". ".join(s.strip() for s in sentences[:2]).strip().rstrip(".")
        return f"round {step.round}: {result}."
    result = sentences[0].strip().rstrip(".")
    if step.kind == "segment":
        return f"round {step.round}: {result}."
    return f"round {step.round}: a mistake was corrected: {result}."


class HierarchicalPolicy(BudgetedPolicy):
    """Zones with budgets and a watermark. Stateless."""

    name = "hierarchical"

    pins_tried_note = True

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
            if not tried and not shown:
                return costs.total(sorted(kept))
            phrases = sum(self.counter.text(p) + 3 for p in tried)
            note = NOTE_OVERHEAD + phrases + sum(line_cost[i] for i in shown)
            return costs.total(sorted(kept)) + note

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
        archive_lines = [lines[i] for i in shown]
        notes = [history.prompts.render("context_archive", lines=archive_lines)] if shown else []
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
