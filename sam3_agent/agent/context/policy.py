"""The interface every context policy implements, the base the budgeted ones build on, and
the three stateless ones (keep-all, fifo, decay); the invariants every policy keeps are
listed in docs/context-policies.md."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import (
    Budget,
    Context,
    ContextBudgetError,
    Costs,
    Decision,
    Evicted,
    EvictionRecord,
    History,
    render,
    tried_before,
)


class ContextPolicy(Protocol):
    """Builds each main call's context from the history (never mutating it), one object per
    session; a subclass inherits the stateless defaults."""

    name: str

    async def build(self, history: History) -> Context:
        """The context for the next call; ContextBudgetError when the pinned part does not fit."""
        ...

    async def save_state(self) -> dict[str, Any] | None:
        """What the policy carries between calls, JSON-ready (None: nothing), committed with
        each round; a resume gives it to :meth:`restore_state` to send what it would have."""
        return None

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from a state :meth:`save_state` returned (a resumed session)."""
        return None

    async def settle(self) -> None:
        """Finish what the policy started for a call that will not come (the session ended)."""
        return None

    async def aclose(self) -> None:
        """Cancel what the policy still runs in the background (the session is over)."""
        return None


class BudgetedPolicy(ContextPolicy):
    """A stateless :class:`ContextPolicy` choosing rounds under a token :class:`~.types.Budget`:
    subclasses set :attr:`name` and implement :meth:`select`."""

    name: str = ""
    pins_tried_note = False
    """Whether the note naming every phrase tried but the pinned rounds' is pinned (evicting
    for the budget may add phrases to it, so the longest note is reckoned with)."""

    def __init__(self, budget: Budget, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter

    async def build(self, history: History) -> Context:
        return self.build_sync(history)

    def build_sync(self, history: History, started: float | None = None) -> Context:
        """The context for the next call; ``started`` (default now) is for the latency."""
        started = time.perf_counter() if started is None else started
        costs = self.measure(history)
        return self.conclude(history, costs, self.select(history, costs), started)

    def select(self, history: History, costs: Costs) -> Decision:
        """The rounds to send and the notes of the request, within the budget if possible."""
        raise NotImplementedError

    def pinned_note(self, costs: Costs) -> int:
        """The most tokens a note the policy pins in the request may take (0: it pins none)."""
        if not self.pins_tried_note:
            return 0
        return costs.note_tokens(tried_before(costs.history.steps, sorted(costs.protected())))

    def measure(self, history: History) -> Costs:
        """The history's costs; ContextBudgetError when the pinned part alone does not fit."""
        costs, budget = Costs(self.counter, history), self.budget
        pinned = costs.total(sorted(costs.protected()), self.pinned_note(costs))
        if pinned > budget.limit:
            raise ContextBudgetError(
                f"context budget too small: the pinned context (system prompt, request"
                f"{', current masks image' if costs.current is not None else ''}"
                f"{', latest round' if costs.rounds else ''}) needs {pinned} tokens "
                f"but `max_context_tokens={budget.max_context_tokens}` minus the "
                f"{budget.reserve_tokens}-token reply reserve leaves {budget.limit} "
                f"(policy {self.name})"
            )
        return costs

    def conclude(
        self, history: History, costs: Costs, decision: Decision, started: float
    ) -> Context:
        """Render ``decision``, check it fits the budget, and build the :class:`Context`."""
        budget, policy = self.budget, self.name
        context = render(history, decision)
        tokens = costs.counter.messages(context.messages)
        if tokens.total > budget.limit:
            raise ContextBudgetError(
                f"context budget exceeded: policy {policy} needs {tokens.total} tokens for round "
                f"{history.next_round} but `max_context_tokens={budget.max_context_tokens}` minus "
                f"the {budget.reserve_tokens}-token reply reserve leaves {budget.limit}"
            )
        record = EvictionRecord(
            policy=policy,
            budget=budget,
            kept_rounds=context.kept_rounds,
            evicted=sorted(decision.evicted, key=lambda e: e.round),
            tokens_before=costs.full(),
            tokens_after=tokens,
            images_replaced=context.images_replaced,
            tried_phrases=list(decision.tried_phrases),
            scores=decision.scores,
            zones=decision.zones,
            digests=decision.digests,
        )
        record.latency_s = time.perf_counter() - started
        return replace(context, eviction=record)


def evict_in_order(
    costs: Costs,
    kept: Sequence[int],
    order: Sequence[int],
    limit: int,
    reason: str,
    head_extra: int = 0,
    scores: dict[int, float] | None = None,
) -> tuple[list[int], list[Evicted]]:
    """Evict rounds of ``kept`` in ``order`` (protected ones skipped) until the total fits
    ``limit`` (or nothing else can go); the rounds still kept (sorted) and the evictions."""
    keep = set(kept)
    protected = costs.protected()
    steps = costs.history.steps
    evicted: list[Evicted] = []
    total = costs.total(sorted(keep), head_extra)
    for i in order:
        if total <= limit:
            break
        if i not in keep or i in protected:
            continue
        keep.discard(i)
        total -= costs.rounds[i]
        score = None if scores is None else scores.get(steps[i].round)
        evicted.append(Evicted(steps[i].round, reason, score))
    return sorted(keep), evicted


def evict_lowest(
    costs: Costs,
    limit: int,
    reason: str,
    scores: Callable[[], dict[int, float]],
    unscored: float | None = None,
) -> Decision:
    """Every round while the history fits ``limit``; past it, the lowest ``scores()`` (by round,
    computed only then) leave first, ties oldest first; ``unscored`` ones are not recorded."""
    steps = costs.history.steps
    everything = list(range(len(steps)))
    if costs.full() <= limit:
        return Decision(everything)
    by_round = scores()
    order = sorted(everything, key=lambda i: (by_round[steps[i].round], i))
    recorded = {r: s for r, s in by_round.items() if unscored is None or s != unscored}
    kept, evicted = evict_in_order(costs, everything, order, limit, reason, scores=recorded)
    return Decision(kept, evicted=evicted, scores=recorded)


class KeepAllPolicy(BudgetedPolicy):
    """``keep-all``: every round in full (images by the shared rule), the baseline; a history
    that outgrows the budget ends the session with a budget failure, as the endpoint would."""

    name = "keep-all"

    def select(self, history: History, costs: Costs) -> Decision:
        return Decision(range(len(history.steps)))


class FifoPolicy(BudgetedPolicy):
    """``fifo``: the pinned part plus the newest rounds that fit; nothing stands for the rounds
    that leave, so the model forgets which phrases it tried once their rounds are gone."""

    name = "fifo"

    def select(self, history: History, costs: Costs) -> Decision:
        everything = range(len(history.steps))
        kept, evicted = evict_in_order(
            costs, everything, everything, self.budget.limit, "budget: oldest first"
        )
        return Decision(kept, evicted=evicted)


DEFAULT_WEIGHTS: dict[str, float] = {"segment": 1.0, "examine": 1.5, "correction": 1.2}
"""Examine verdicts cost the most to redo. A correction outranks every search round older
than it (all scores decay at the same rate), so the model keeps seeing that it was corrected
and does not repeat the refused call; it still leaves before newer search rounds once it is
more than ``ln(1.2) / rate`` (about 1.2) rounds older than them."""

DEFAULT_RATE = 0.15  # per round: a round's score halves in about 4.6 rounds


class DecayPolicy(BudgetedPolicy):
    """``decay``: the lowest-scoring rounds leave first, scored ``weight(kind) * exp(-rate *
    age)`` (``age`` in rounds, 0 for the latest; ties oldest first)."""

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
        def scores() -> dict[int, float]:
            latest = history.steps[-1].round if history.steps else 0
            return {
                s.round: self.weights.get(s.kind, 1.0) * math.exp(-self.rate * (latest - s.round))
                for s in history.steps
            }

        return evict_lowest(costs, self.budget.limit, "budget: lowest score", scores)
