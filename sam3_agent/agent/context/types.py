"""The values every context policy shares (the history, the budget, the context with its
eviction record), and the rendering and token costs of rounds; the interface is :mod:`.policy`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sam3_agent.agent.context.tokens import TokenCounter, Tokens
from sam3_agent.agent.prompts import PromptSet, default_prompt_set
from sam3_agent.agent.steps import ActionStep, TaskStep, current_masks_index
from sam3_agent.values.errors import Sam3AgentError
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart


class ContextBudgetError(Sam3AgentError):
    """Even the pinned part of the context does not fit the token budget; the session fails
    before the call, so the endpoint never answers with a context-length error."""


@dataclass(frozen=True)
class Budget:
    """The token budget of one call; ``watermark`` is the share of :attr:`limit` at which
    hierarchical policies start archiving."""

    max_context_tokens: int
    reserve_tokens: int = 1024
    watermark: float = 0.7

    @property
    def limit(self) -> int:
        """Tokens the messages may use."""
        return self.max_context_tokens - self.reserve_tokens

    @property
    def watermark_tokens(self) -> int:
        return int(self.limit * self.watermark)

    def to_dict(self) -> dict[str, Any]:
        names = ("max_context_tokens", "reserve_tokens", "limit", "watermark")
        return {name: getattr(self, name) for name in names}


@dataclass(frozen=True)
class History:
    """What a policy reads: the session so far. ``steps`` are in round order."""

    system_prompt: str
    task: TaskStep
    steps: Sequence[ActionStep]
    prompts: PromptSet = field(default_factory=default_prompt_set)
    """The set the session renders with (the request, notes, tool-result notes)."""
    kept_note: str = ""
    """What the kept masks are (the extended tools), pinned after the request like it."""

    @property
    def next_round(self) -> int:
        """1-based number of the call the context is built for."""
        return self.steps[-1].round + 1 if self.steps else 1


@dataclass(frozen=True)
class Evicted:
    """One round left out of the context, and why."""

    round: int
    reason: str
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"round": self.round, "reason": self.reason}
        if self.score is not None:
            out["score"] = round(self.score, 6)
        return out


@dataclass
class EvictionRecord:
    """What one policy decision kept and evicted; ``to_dict``: the trace's ``context_policy``."""

    policy: str
    budget: Budget
    kept_rounds: list[int]
    evicted: list[Evicted]
    tokens_before: int
    tokens_after: Tokens
    images_replaced: list[int] = field(default_factory=list)
    tried_phrases: list[str] = field(default_factory=list)
    zones: dict[str, int] | None = None
    scores: dict[int, float] | None = None
    switch: dict[str, Any] | None = None
    digests: dict[str, Any] | None = None
    mode: str | None = None
    latency_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "mode": self.mode,
            "budget": self.budget.to_dict(),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after.to_dict(),
            "kept_rounds": self.kept_rounds,
            "evicted": [e.to_dict() for e in self.evicted],
            "images_replaced_by_text": self.images_replaced,
            "tried_phrases_note": self.tried_phrases,
            "zones": self.zones,
            "scores": (
                None
                if self.scores is None
                else {str(r): round(s, 6) for r, s in sorted(self.scores.items())}
            ),
            "switch": self.switch,
            "digests": self.digests,
            "latency_ms": round(self.latency_s * 1e3, 3),
        }


@dataclass(frozen=True)
class Context:
    """What one MLLM call receives, and what the policy left out (for the trace)."""

    messages: list[ChatMessage]
    kept_rounds: list[int]
    dropped_rounds: list[int]
    images_replaced: list[int]
    tried_phrases: list[str]
    eviction: EvictionRecord | None = None


def record_of(context: Context) -> EvictionRecord:
    """The eviction record of a context a policy built (every policy writes one)."""
    if context.eviction is None:
        raise RuntimeError("this context was built without a policy and has no record")
    return context.eviction


@dataclass(frozen=True)
class Decision:
    """What a policy chose for one call: ``kept`` indices into ``history.steps`` (any order);
    ``notes`` (digests, archive) follow the tried-phrases note in the request."""

    kept: Sequence[int]
    tried_phrases: Sequence[str] = ()
    notes: Sequence[str] = ()
    evicted: Sequence[Evicted] = ()
    scores: dict[int, float] | None = None
    zones: dict[str, int] | None = None
    digests: dict[str, Any] | None = None


def request_message(
    history: History, tried_phrases: Sequence[str] = (), notes: Sequence[str] = ()
) -> ChatMessage:
    """The raw image and the request, with the tried-phrases note, the kept masks' note and
    any notes after it."""
    prompts, task = history.prompts, history.task
    text = prompts.render("user_task", query=task.query, tried_phrases=list(tried_phrases))
    parts: list[ImagePart | TextPart] = [ImagePart(task.image), TextPart(text)]
    if history.kept_note:
        parts.append(TextPart("\n\n" + history.kept_note))
    parts.extend(TextPart("\n\n" + note) for note in notes if note)
    return ChatMessage("user", tuple(parts))


def round_messages(history: History, i: int, current: int | None) -> tuple[ChatMessage, ...]:
    """Step ``i`` as sent: its image only if it shows the selectable masks (step ``current``)."""
    return history.steps[i].messages(
        with_image=i == current, masks_gone=current is None, prompts=history.prompts
    )


def render(history: History, decision: Decision) -> Context:
    """The context ``decision`` sends, without an eviction record."""
    steps = history.steps
    messages = [
        ChatMessage.text("system", history.system_prompt),
        request_message(history, decision.tried_phrases, decision.notes),
    ]
    current = current_masks_index(steps)
    replaced = []
    kept = sorted(set(decision.kept))
    for i in kept:
        messages.extend(round_messages(history, i, current))
        if steps[i].observation.image is not None and i != current:
            replaced.append(steps[i].round)
    dropped = [s.round for i, s in enumerate(steps) if i not in kept]
    kept_rounds = [steps[i].round for i in kept]
    return Context(messages, kept_rounds, dropped, replaced, list(decision.tried_phrases))


@dataclass
class Costs:
    """Token costs of a history's parts, computed once per call: ``rounds[i]``, step ``i`` as
    sent (its image only if it shows the selectable masks); ``head``, the bare request's."""

    counter: TokenCounter
    history: History
    head: int = 0
    rounds: list[int] = field(default_factory=list)
    current: int | None = None
    _request: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        history, count = self.history, self.counter.message
        self.current = current_masks_index(history.steps)
        self._request = count(request_message(history)).total
        system = count(ChatMessage.text("system", history.system_prompt)).total
        self.head = system + self._request + self.counter.request_overhead
        self.rounds = [
            sum(count(m).total for m in round_messages(history, i, self.current))
            for i in range(len(history.steps))
        ]

    def protected(self) -> set[int]:
        """Rounds no policy may evict: the one showing the selectable masks, and the latest
        round (the model's own last reply and what answered it)."""
        out = set() if self.current is None else {self.current}
        if self.rounds:
            out.add(len(self.rounds) - 1)
        return out

    def total(self, kept: Iterable[int], head_extra: int = 0) -> int:
        return self.head + head_extra + sum(self.rounds[i] for i in set(kept))

    def full(self) -> int:
        """Tokens if every round were sent (the ``tokens_before`` of every record)."""
        return self.total(range(len(self.rounds)))

    def note_tokens(self, tried_phrases: Sequence[str], notes: Sequence[str] = ()) -> int:
        """What the tried-phrases note and ``notes`` add to the first user message."""
        if not tried_phrases and not notes:
            return 0
        with_note = request_message(self.history, tried_phrases, notes)
        return self.counter.message(with_note).total - self._request


def tried_before(steps: Sequence[ActionStep], kept: Sequence[int]) -> list[str]:
    """Phrases of executed segment rounds not in ``kept``, in the order tried."""
    keep = set(kept)
    return [
        s.phrase for i, s in enumerate(steps) if s.kind == "segment" and s.phrase and i not in keep
    ]
