"""The interface every context policy implements, and the base the budgeted ones build on.

The invariants every policy keeps are listed in docs/context-policies.md: the system prompt
byte for byte, the request, rounds whole and in order, at most two images (only the
selectable masks' one), the latest round whole, and the budget
(:class:`~.types.ContextBudgetError` when even the pinned part does not fit).
:class:`BudgetedPolicy` measures the history, checks the pinned part, and renders and
records what the policy's ``select`` chose.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
    """Builds each main call's context from the history.

    One policy object serves one session: state it keeps between calls (digests, smoothed
    scores, the current mode) is explicit on the object. ``build`` never mutates the
    history. :class:`BudgetedPolicy` gives every method but ``build`` its default.
    """

    name: str

    async def build(self, history: History) -> Context:
        """The context for the next call; ContextBudgetError when the pinned part does not fit."""
        ...

    async def save_state(self) -> dict[str, Any] | None:
        """What the policy carries between calls, JSON-ready, committed with each round
        (``summary``'s digests, ``auto``'s mode, ``attention``'s masses); None when it
        carries nothing. A resumed session gives it back to :meth:`restore_state`, so it
        sends what the uninterrupted one would."""
        ...

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from a state :meth:`save_state` returned (a resumed session)."""
        ...

    async def settle(self) -> None:
        """Finish what the policy started for a call that will not come (the session ended):
        ``summary`` takes in the digest it was writing ahead, so that its call is counted."""
        ...

    async def aclose(self) -> None:
        """Cancel what the policy still runs in the background (the session is over)."""
        ...


class BudgetedPolicy:
    """A :class:`ContextPolicy` that chooses rounds under a token :class:`~.types.Budget`.

    Subclasses set :attr:`name` and implement :meth:`select`; ``build`` measures the
    history, checks the pinned part, and renders and records what ``select`` chose. The
    defaults keep no state, and have nothing to settle or close.
    """

    name: str = ""

    def __init__(self, budget: Budget, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter

    async def build(self, history: History) -> Context:
        return self.build_sync(history)

    def build_sync(self, history: History, started: float | None = None) -> Context:
        """The context for the next call; ``started`` is when the call's work began (now
        when not given), for the record's latency."""
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
        return 0

    def measure(self, history: History) -> Costs:
        """The history's costs, once the pinned part (with :meth:`pinned_note`) is known to fit."""
        costs = Costs(self.counter, history)
        check_pinned(costs, self.budget, self.name, self.pinned_note(costs))
        return costs

    def conclude(
        self, history: History, costs: Costs, decision: Decision, started: float
    ) -> Context:
        """Render ``decision``, check it fits the budget, and build the :class:`Context`
        with its record (``started`` is when the call's work began)."""
        budget, policy = self.budget, self.name
        messages, replaced = render(history, decision)
        tokens = costs.counter.messages(messages)
        if tokens.total > budget.limit:
            raise ContextBudgetError(
                f"context budget exceeded: policy {policy} needs {tokens.total} tokens for round "
                f"{history.next_round} but `max_context_tokens={budget.max_context_tokens}` minus "
                f"the {budget.reserve_tokens}-token reply reserve leaves {budget.limit}"
            )
        steps = history.steps
        kept_set = set(decision.kept)
        kept_rounds = [steps[i].round for i in sorted(kept_set)]
        dropped = [s.round for i, s in enumerate(steps) if i not in kept_set]
        record = EvictionRecord(
            policy=policy,
            budget=budget,
            kept_rounds=kept_rounds,
            evicted=sorted(decision.evicted, key=lambda e: e.round),
            tokens_before=costs.full(),
            tokens_after=tokens,
            images_replaced=replaced,
            tried_phrases=list(decision.tried_phrases),
            scores=decision.scores,
            zones=decision.zones,
            digests=decision.digests,
        )
        record.latency_s = time.perf_counter() - started
        return Context(
            messages=messages,
            kept_rounds=kept_rounds,
            dropped_rounds=dropped,
            images_replaced=replaced,
            tried_phrases=list(decision.tried_phrases),
            eviction=record,
        )


def longest_tried_note(costs: Costs) -> int:
    """Tokens of the note naming every phrase tried but those of the pinned rounds: the
    longest tried-phrases note, which a policy that pins that note must reckon with."""
    return costs.note_tokens(tried_before(costs.history.steps, sorted(costs.protected())))


def check_pinned(costs: Costs, budget: Budget, policy: str, head_extra: int = 0) -> None:
    """Raise :class:`ContextBudgetError` when the pinned part alone exceeds the budget."""
    pinned = costs.total(sorted(costs.protected()), head_extra)
    if pinned > budget.limit:
        raise ContextBudgetError(
            f"context budget too small: the pinned context (system prompt, request"
            f"{', current masks image' if costs.current is not None else ''}"
            f"{', latest round' if costs.rounds else ''}) needs {pinned} tokens "
            f"but `max_context_tokens={budget.max_context_tokens}` minus the "
            f"{budget.reserve_tokens}-token reply reserve leaves {budget.limit} "
            f"(policy {policy})"
        )


def evict_in_order(
    costs: Costs,
    kept: Sequence[int],
    order: Sequence[int],
    limit: int,
    reason: str,
    head_extra: int = 0,
    scores: dict[int, float] | None = None,
) -> tuple[list[int], list[Evicted]]:
    """Evict rounds of ``kept`` in ``order`` (protected ones skipped) until the total fits.

    Returns the rounds still kept (indices, sorted) and the evictions (with scores when
    given). Stops as soon as the total is within ``limit``; may return over the limit
    when nothing else can go (the caller checks the pinned part).
    """
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
    """Every round while the history fits ``limit``; past it, the rounds with the lowest
    ``scores()`` (keyed by round number) leave first, ties oldest first, until it fits.

    Scores are computed only when something must go; they are recorded, except those
    equal to ``unscored`` (a round the scores know nothing of yet).
    """
    steps = costs.history.steps
    everything = list(range(len(steps)))
    if costs.full() <= limit:
        return Decision(everything)
    by_round = scores()
    order = sorted(everything, key=lambda i: (by_round[steps[i].round], i))
    recorded = {r: s for r, s in by_round.items() if unscored is None or s != unscored}
    kept, evicted = evict_in_order(costs, everything, order, limit, reason, scores=recorded)
    return Decision(kept, evicted=evicted, scores=recorded)
