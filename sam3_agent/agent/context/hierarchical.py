"""``hierarchical`` (zones with token budgets: pinned, working, archive, reserve) and ``auto``
(``sam3`` under the watermark, ``hierarchical`` past it); see docs/context-policies.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.sam3 import Sam3Policy, anchor_index
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import (
    Budget,
    Context,
    Costs,
    Decision,
    Evicted,
    History,
    record_of,
    tried_before,
)
from sam3_agent.agent.steps import ActionStep

logger = logging.getLogger(__name__)

ARCHIVE_SHARE = 0.2  # of the budget's limit, for the archive lines
NOTE_OVERHEAD = 80  # tokens of the wording around the tried-phrases note and the archive, at most


def archive_line(step: ActionStep) -> str:
    """One line standing for ``step``: its result's first sentence (an examine round's first
    two: the verdict counts, then which masks were accepted, which a later selection needs)."""
    sentences = step.observation.text.split(". ")
    if step.kind == "examine":
        result = ". ".join(s.strip() for s in sentences[:2]).strip().rstrip(".")
        return f"round {step.round}: {result}."
    result = sentences[0].strip().rstrip(".")
    if step.kind in ("segment", "keep"):
        return f"round {step.round}: {result}."
    return f"round {step.round}: a mistake was corrected: {result}."


class HierarchicalPolicy(BudgetedPolicy):
    """Past the watermark rounds move to the archive oldest first, the latest search's only
    when the hard limit requires. Stateless."""

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
        # Oldest first can overshoot: a round archived early may fit again once a later,
        # larger one has gone. Every working round that fits is put back.
        for i in [i for i in archived if i >= core_start]:
            kept.add(i)
            if without_archive() > limit:
                kept.discard(i)
            else:
                archived.remove(i)
                del reasons[i]
        shown = shown_lines()
        for i in sorted(set(archived) - set(shown)):
            reasons[i] = "archive over its budget: line dropped"
        evicted = [Evicted(steps[i].round, reason) for i, reason in reasons.items()]
        tried = tried_before(steps, sorted(kept))
        archive_lines = [lines[i] for i in shown]
        notes = [history.prompts.render("context_archive", lines=archive_lines)] if shown else []
        tried_tokens = costs.note_tokens(tried)
        zones = {
            "pinned": costs.head + tried_tokens + sum(costs.rounds[i] for i in protected),
            "working": sum(costs.rounds[i] for i in kept if i not in protected),
            "archive": costs.note_tokens(tried, notes) - tried_tokens,
            "reserve": self.budget.reserve_tokens,
        }
        return Decision(sorted(kept), tried, notes, evicted, zones=zones)


MIN_ROUNDS_BETWEEN_SWITCHES = 2  # so the context never flip-flops


class AutoPolicy(BudgetedPolicy):
    """Switches between ``sam3`` and ``hierarchical``; each call is built by the one in use
    (so ``build`` is its own, and a budget error names that policy)."""

    name = "auto"

    def __init__(self, budget: Budget, counter: TokenCounter) -> None:
        super().__init__(budget, counter)
        self.sam3 = Sam3Policy(budget, counter)
        self.hierarchical = HierarchicalPolicy(budget, counter)
        self.mode = "sam3"
        self.switches: list[dict[str, object]] = []
        self._last_switch_round: int | None = None

    async def save_state(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "last_switch_round": self._last_switch_round,
            "switches": [dict(s) for s in self.switches],
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        self.mode = str(state["mode"])
        last = state["last_switch_round"]
        self._last_switch_round = None if last is None else int(last)
        self.switches = [dict(s) for s in state["switches"]]

    def build_sync(self, history: History, started: float | None = None) -> Context:
        started = time.perf_counter() if started is None else started
        round_number = history.next_round
        pruned = self.sam3.build_sync(history)
        size = record_of(pruned).tokens_after.total
        wanted = "hierarchical" if size > self.budget.watermark_tokens else "sam3"
        switch = None
        cooled = (
            self._last_switch_round is None
            or round_number - self._last_switch_round >= MIN_ROUNDS_BETWEEN_SWITCHES
        )
        if wanted != self.mode and cooled:
            switch = {
                "round": round_number,
                "from": self.mode,
                "to": wanted,
                "sam3_tokens": size,
                "watermark_tokens": self.budget.watermark_tokens,
            }
            logger.info(
                "context policy auto: %s -> %s at round %d", self.mode, wanted, round_number
            )
            self.mode = wanted
            self._last_switch_round = round_number
            self.switches.append(switch)
        context = pruned if self.mode == "sam3" else self.hierarchical.build_sync(history)
        record = record_of(context)
        record.policy = self.name
        record.mode = self.mode
        record.switch = switch
        record.latency_s = time.perf_counter() - started
        return context
