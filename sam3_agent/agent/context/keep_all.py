"""``keep-all``: every round in full; the baseline the other policies are measured against.

Only the images follow the shared rule (the selectable masks' image; older ones become
text), so a call still carries at most two images. Nothing is ever evicted: when the
history outgrows the budget the session ends with a budget failure, as the endpoint would
have refused the call.
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
    finish,
)
from sam3_agent.agent.context.tokens import TokenCounter


class KeepAllPolicy:
    """No pruning. Stateless."""

    name = "keep-all"

    def __init__(self, budget: Budget, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter

    async def build(self, history: History) -> Context:
        started = time.perf_counter()
        costs = Costs(self.counter, history)
        check_pinned(costs, self.budget, self.name)
        return finish(
            history,
            Selection(range(len(history.steps))),
            policy=self.name,
            budget=self.budget,
            costs=costs,
            evicted=[],
            started=started,
        )
