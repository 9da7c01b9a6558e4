"""``fifo``: the pinned head (system prompt, request) plus the newest rounds that fit.

The round showing the selectable masks is pinned too (every policy keeps that image).
Rounds leave oldest first, only when the budget requires it; nothing replaces them, so
the model forgets which phrases it tried once their rounds are gone.
"""

from __future__ import annotations

import time

from sam3_agent.agent.context.base import (
    Budget,
    Context,
    Costs,
    History,
    Selection,
    check_pinned,
    evict_in_order,
    finish,
)
from sam3_agent.agent.context.tokens import TokenCounter


class FifoPolicy:
    """Oldest rounds out first. Stateless."""

    name = "fifo"

    def __init__(self, budget: Budget, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter

    async def build(self, history: History) -> Context:
        started = time.perf_counter()
        costs = Costs(self.counter, history)
        check_pinned(costs, self.budget, self.name)
        everything = range(len(history.steps))
        kept, evicted = evict_in_order(
            costs, everything, everything, self.budget.limit, "budget: oldest first"
        )
        return finish(
            history,
            Selection(kept),
            policy=self.name,
            budget=self.budget,
            costs=costs,
            evicted=evicted,
            started=started,
        )
