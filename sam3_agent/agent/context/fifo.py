"""``fifo``: the pinned part plus the newest rounds that fit; nothing stands for the rounds
that leave, so the model forgets which phrases it tried once their rounds are gone."""

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
