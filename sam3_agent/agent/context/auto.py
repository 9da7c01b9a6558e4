"""``auto``: ``sam3`` while its context is under the watermark, ``hierarchical`` past it; a
switch is recorded and not followed by another for :data:`MIN_ROUNDS_BETWEEN_SWITCHES`
rounds, so the context never flip-flops."""

from __future__ import annotations

import logging
import time
from typing import Any

from sam3_agent.agent.context.hierarchical import HierarchicalPolicy
from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.sam3 import Sam3Policy
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import Budget, Context, History, record_of

logger = logging.getLogger(__name__)

MIN_ROUNDS_BETWEEN_SWITCHES = 2


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
