"""``keep-all``: every round in full; the baseline the other policies are measured against.

Only the images follow the shared rule (the selectable masks' image; older ones become
text), so a call still carries at most two images. Nothing is ever evicted: when the
history outgrows the budget the session ends with a budget failure, as the endpoint would
have refused the call.
"""

from __future__ import annotations

from sam3_agent.agent.context.base import Costs, History, Selection
from sam3_agent.agent.context.policy import BudgetedPolicy, Decision


class KeepAllPolicy(BudgetedPolicy):
    """No pruning. Stateless."""

    name = "keep-all"

    def select(self, history: History, costs: Costs) -> Decision:
        return Decision(Selection(range(len(history.steps))))
