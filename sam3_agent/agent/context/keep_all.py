"""``keep-all``: every round in full; the baseline the other policies are measured against.

Only the images follow the shared rule (the selectable masks' image; older ones become
text), so a call still carries at most two images. Nothing is ever evicted: when the
history outgrows the budget the session ends with a budget failure, as the endpoint would
have refused the call.
"""

from __future__ import annotations

from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.types import Costs, Decision, History


class KeepAllPolicy(BudgetedPolicy):
    """No pruning. Stateless."""

    name = "keep-all"

    def select(self, history: History, costs: Costs) -> Decision:
        return Decision(range(len(history.steps)))
