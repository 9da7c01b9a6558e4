"""The interface every context policy implements, and the base the budgeted ones build on;
the invariants every policy keeps are listed in docs/context-policies.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
    """Builds each main call's context from the history (never mutating it); one object
    serves one session and keeps its state between calls explicit."""

    name: str

    async def build(self, history: History) -> Context:
        """The context for the next call; ContextBudgetError when the pinned part does not fit."""
        ...

    async def save_state(self) -> dict[str, Any] | None:
        """What the policy carries between calls, JSON-ready (None: nothing), committed with
        each round; a resume gives it to :meth:`restore_state` to send what it would have."""
        ...

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from a state :meth:`save_state` returned (a resumed session)."""
        ...

    async def settle(self) -> None:
        """Finish what the policy started for a call that will not come (the session ended)."""
        ...

    async def aclose(self) -> None:
        """Cancel what the policy still runs in the background (the session is over)."""
        ...


class BudgetedPolicy:
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

    async def save_state(self) -> dict[str, Any] | None:
        return None

    def restore_state(self, state: dict[str, Any]) -> None:
        return None

    async def settle(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

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
    """Every round while the history fits ``limit``; past it, the lowest ``scores()`` (by
    round number, computed only then) leave first, ties oldest first; ``unscored`` ones are
    not recorded."""
    steps = costs.history.steps
    everything = list(range(len(steps)))
    if costs.full() <= limit:
        return Decision(everything)
    by_round = scores()
    order = sorted(everything, key=lambda i: (by_round[steps[i].round], i))
    recorded = {r: s for r, s in by_round.items() if unscored is None or s != unscored}
    kept, evicted = evict_in_order(costs, everything, order, limit, reason, scores=recorded)
    return Decision(kept, evicted=evicted, scores=recorded)
