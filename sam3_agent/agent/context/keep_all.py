"""``keep-all``: every round in full (images by the shared rule), the baseline; a history
that outgrows the budget ends the session with a budget failure, as the endpoint would."""

from __future__ import annotations

from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.types import Costs, Decision, History


class KeepAllPolicy(BudgetedPolicy):
    """No pruning. Stateless."""

    name = "keep-all"

    def select(self, history: History, costs: Costs) -> Decision:
        return Decision(range(len(history.steps)))
