"""``attention``: the least attended rounds leave first (a round's mass averaged over the last
calls that showed it; unseen: most attended). Only an :class:`AttentionSource` (the
in-process ``transformers`` MLLM) can serve it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from sam3_agent.agent.context.policy import BudgetedPolicy, evict_lowest
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import Budget, Context, Costs, Decision, History
from sam3_agent.backends.base import ChatModel, ChatModelWrapper
from sam3_agent.values.errors import UserError
from sam3_agent.values.messages import ChatMessage

DEFAULT_WINDOW = 3  # calls over which a round's attention mass is averaged


@runtime_checkable
class AttentionSource(Protocol):
    """A chat model that reports where its attention went in its latest call."""

    def record_attention(self) -> None: ...

    def last_message_attention(
        self, messages: Sequence[ChatMessage] | None = None
    ) -> list[float] | None:
        """Share of attention per message of request ``messages`` (sums to 1), or None."""


def round_sizes(messages: Sequence[ChatMessage]) -> list[int]:
    """Messages per kept round of a rendered context: each starts at its assistant message."""
    sizes: list[int] = []
    for message in messages[2:]:
        if message.role == "assistant" or not sizes:
            sizes.append(1)
        else:
            sizes[-1] += 1
    return sizes


def require_source(chat_model: ChatModel) -> AttentionSource:
    """``chat_model``, or the model it wraps, as an :class:`AttentionSource`; else UserError."""
    model: object = chat_model
    while not isinstance(model, AttentionSource) and isinstance(model, ChatModelWrapper):
        model = model.inner
    if isinstance(model, AttentionSource):
        return model
    raise UserError(
        f"`context_policy='attention'` needs the in-process transformers MLLM (`llm='hf:...'`); "
        f"the MLLM backend {chat_model.name!r} does not report attention"
    )


class AttentionPolicy(BudgetedPolicy):
    """Evict the least attended rounds first; a round's mass is averaged over ``window`` calls."""

    name = "attention"

    def __init__(
        self,
        budget: Budget,
        counter: TokenCounter,
        source: AttentionSource,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        if window < 1:
            raise UserError(f"the attention window must be >= 1, got {window}")
        super().__init__(budget, counter)
        self.source = source
        self.window = window
        self.masses: dict[int, deque[float]] = {}
        self._last: tuple[list[ChatMessage], list[int]] | None = None
        source.record_attention()

    def observe(
        self,
        per_message: Sequence[float],
        kept_rounds: Sequence[int],
        round_sizes: Sequence[int] | None = None,
    ) -> None:
        """Add one call's attention: messages 0 and 1 are the system prompt and the request,
        then the kept rounds, ``round_sizes[k]`` messages each (default 2)."""
        sizes = [2] * len(kept_rounds) if round_sizes is None else round_sizes
        start = 2
        for round_number, size in zip(kept_rounds, sizes, strict=True):
            if start >= len(per_message):
                break
            mass = sum(per_message[start : start + size])
            self.masses.setdefault(round_number, deque(maxlen=self.window)).append(mass)
            start += size

    def smoothed(self, round_number: int) -> float:
        seen = self.masses.get(round_number)
        return float("inf") if not seen else sum(seen) / len(seen)

    async def save_state(self) -> dict[str, Any]:
        """Each round's recent masses, the latest call's read now (it dies with the process)."""
        self._observe_last()
        return {
            "window": self.window,
            "masses": {str(r): list(m) for r, m in sorted(self.masses.items())},
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        self.masses = {
            int(r): deque((float(x) for x in m), maxlen=self.window)
            for r, m in state["masses"].items()
        }

    def _observe_last(self) -> None:
        if self._last is not None:
            messages, rounds = self._last
            self._last = None
            per_message = self.source.last_message_attention(messages)
            if per_message is not None:
                self.observe(per_message, rounds, round_sizes(messages))

    async def build(self, history: History) -> Context:
        started = time.perf_counter()
        self._observe_last()
        context = self.build_sync(history, started)
        self._last = (context.messages, context.kept_rounds)
        return context

    def select(self, history: History, costs: Costs) -> Decision:
        return evict_lowest(
            costs,
            self.budget.limit,
            "budget: least attended",
            lambda: {s.round: self.smoothed(s.round) for s in history.steps},
            unscored=float("inf"),
        )
