"""``fifo``: the pinned head (system prompt, request) plus the newest rounds that fit.

The round showing the selectable masks is pinned too (every policy keeps that image).
Rounds leave oldest first, only when the budget requires it; nothing replaces them, so
the model forgets which phrases it tried once their rounds are gone.
"""

from __future__ import annotations

from sam3_agent.agent.context.policy import BudgetedPolicy, evict_in_order
from sam3_agent.agent.context.types import Costs, Decision, History


class FifoPolicy(BudgetedPolicy):
    """Oldest rounds out first. Stateless."""

    name = "fifo"

    def select(self, history: History, costs: Costs) -> Decision:
        everything = range(len(history.steps))
        kept, evicted = evict_in_order(
            costs, everything, everything, self.budget.limit, "budget: oldest first"
        )
        return Decision(kept, evicted=evicted)
