"""The base every budgeted policy builds on, and the steps it shares.

A call's context is built in the same four steps by every policy: measure the history
(:class:`~sam3_agent.agent.context.base.Costs`), refuse a budget that cannot hold even the
pinned part (:func:`check_pinned`), let the policy choose what to send (its
:meth:`BudgetedPolicy.select`, a :class:`Decision`), then render that, check it fits and
write the eviction record (:func:`finish`). :class:`BudgetedPolicy` does the first, second
and last; a policy only says what it keeps. A policy that does something before it measures
(``attention`` reads the previous call's attention, ``summary`` takes in a background
digest) overrides ``build`` with :meth:`~BudgetedPolicy.measure` and
:meth:`~BudgetedPolicy.conclude`; one that pins a note in the request (``sam3``,
``hierarchical``) says how large it may get in :meth:`~BudgetedPolicy.pinned_note`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sam3_agent.agent.context.base import (
    Budget,
    Context,
    ContextBudgetError,
    Costs,
    Evicted,
    EvictionRecord,
    History,
    Selection,
    render,
    tried_before,
)
from sam3_agent.agent.context.tokens import TokenCounter


@dataclass(frozen=True)
class Decision:
    """What a policy chose for one call, before rendering.

    Attributes:
        selection: the rounds sent in full and the notes of the request.
        evicted: the rounds left out, and why.
        scores / zones / digests: the policy's own fields of the eviction record.
    """

    selection: Selection
    evicted: Sequence[Evicted] = ()
    scores: dict[int, float] | None = None
    zones: dict[str, int] | None = None
    digests: dict[str, Any] | None = None


class BudgetedPolicy:
    """A policy that chooses rounds under a token :class:`Budget`.

    Subclasses set :attr:`name` and implement :meth:`select`; ``build`` measures the
    history, checks the pinned part, and renders and records what ``select`` chose.
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

    def select(self, history: History, costs: Costs) -> Decision:
        """The rounds to send and the notes of the request, within the budget if possible."""
        raise NotImplementedError

    def pinned_note(self, costs: Costs) -> int:
        """The most tokens a note the policy pins in the request may take (0: it pins none)."""
        return 0

    def measure(self, history: History) -> Costs:
        """The history's costs, once the pinned part (with :meth:`pinned_note`) is known to fit.

        Raises:
            ContextBudgetError: even the pinned part does not fit the budget.
        """
        costs = Costs(self.counter, history)
        check_pinned(costs, self.budget, self.name, self.pinned_note(costs))
        return costs

    def conclude(
        self, history: History, costs: Costs, decision: Decision, started: float
    ) -> Context:
        """Render ``decision``, check it fits and record it (:func:`finish`)."""
        return finish(
            history,
            decision.selection,
            policy=self.name,
            budget=self.budget,
            costs=costs,
            evicted=decision.evicted,
            started=started,
            scores=decision.scores,
            zones=decision.zones,
            digests=decision.digests,
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
        return Decision(Selection(everything))
    by_round = scores()
    order = sorted(everything, key=lambda i: (by_round[steps[i].round], i))
    recorded = {r: s for r, s in by_round.items() if unscored is None or s != unscored}
    kept, evicted = evict_in_order(costs, everything, order, limit, reason, scores=recorded)
    return Decision(Selection(kept), evicted, scores=recorded)


def finish(
    history: History,
    selection: Selection,
    *,
    policy: str,
    budget: Budget,
    costs: Costs,
    evicted: Sequence[Evicted],
    started: float,
    **extra: Any,
) -> Context:
    """Render ``selection``, check it fits, and build the :class:`Context` with its record."""
    messages, replaced = render(history, selection)
    tokens = costs.counter.messages(messages)
    if tokens.total > budget.limit:
        raise ContextBudgetError(
            f"context budget exceeded: policy {policy} needs {tokens.total} tokens for round "
            f"{history.next_round} but `max_context_tokens={budget.max_context_tokens}` minus "
            f"the {budget.reserve_tokens}-token reply reserve leaves {budget.limit}"
        )
    steps = history.steps
    kept_set = set(selection.kept)
    kept_rounds = [steps[i].round for i in sorted(kept_set)]
    dropped = [s.round for i, s in enumerate(steps) if i not in kept_set]
    record = EvictionRecord(
        policy=policy,
        budget=budget,
        kept_rounds=kept_rounds,
        evicted=sorted(evicted, key=lambda e: e.round),
        tokens_before=costs.full(),
        tokens_after=tokens,
        images_replaced=replaced,
        tried_phrases=list(selection.tried_phrases),
        **extra,
    )
    record.latency_s = time.perf_counter() - started
    return Context(
        messages=messages,
        kept_rounds=kept_rounds,
        dropped_rounds=dropped,
        images_replaced=replaced,
        tried_phrases=list(selection.tried_phrases),
        eviction=record,
    )
