"""``decay``: the lowest-scoring rounds leave first, scored ``weight(kind) * exp(-rate * age)``
(``age`` in rounds, 0 for the latest; ties oldest first)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from sam3_agent.agent.context.policy import BudgetedPolicy, evict_lowest
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import Budget, Costs, Decision, History

DEFAULT_WEIGHTS: dict[str, float] = {"segment": 1.0, "examine": 1.5, "correction": 1.2}
"""Examine verdicts cost the most to redo. A correction outranks every search round older
than it (all scores decay at the same rate), so the model keeps seeing that it was corrected
and does not repeat the refused call; it still leaves before newer search rounds once it is
more than ``ln(1.2) / rate`` (about 1.2) rounds older than them."""

DEFAULT_RATE = 0.15
"""Per-round decay: a round's score halves in about 4.6 rounds."""


def decay_scores(history: History, weights: Mapping[str, float], rate: float) -> dict[int, float]:
    latest = history.steps[-1].round if history.steps else 0
    return {
        s.round: weights.get(s.kind, 1.0) * math.exp(-rate * (latest - s.round))
        for s in history.steps
    }


class DecayPolicy(BudgetedPolicy):
    """Evict by decayed importance. Stateless."""

    name = "decay"

    def __init__(
        self,
        budget: Budget,
        counter: TokenCounter,
        weights: Mapping[str, float] | None = None,
        rate: float = DEFAULT_RATE,
    ) -> None:
        super().__init__(budget, counter)
        self.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        self.rate = rate

    def select(self, history: History, costs: Costs) -> Decision:
        return evict_lowest(
            costs,
            self.budget.limit,
            "budget: lowest score",
            lambda: decay_scores(history, self.weights, self.rate),
        )
