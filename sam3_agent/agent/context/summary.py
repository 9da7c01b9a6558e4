"""``summary``: rounds leave oldest first, each run replaced by a digest the MLLM writes in
its own call (never summarised again; the oldest dropped when digests no longer fit); what
the next call will likely evict is condensed in the background during the main call."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sam3_agent.agent.context.policy import BudgetedPolicy
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import Budget, Context, Costs, Decision, Evicted, History
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.steps import ActionStep
from sam3_agent.backends.base import ChatModel
from sam3_agent.values.errors import Sam3AgentError
from sam3_agent.values.messages import ChatMessage, ChatResponse

logger = logging.getLogger(__name__)

MAX_DIGEST_TOKENS = 200  # a longer digest (as the model wrote it) is cut to this

DIGEST_TAG = re.compile(r"<digest>(.*?)(?:</digest>|$)", re.DOTALL | re.IGNORECASE)
THINK_TAG = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Digest:
    """The condensed text of some rounds. ``level`` 1: written from rounds, never from digests."""

    rounds: tuple[int, ...]
    text: str
    level: int = 1

    def note(self) -> str:
        first, last = self.rounds[0], self.rounds[-1]
        span = f"round {first}" if first == last else f"rounds {first}-{last}"
        return f"[{span}] {self.text}"


@dataclass(frozen=True)
class DigestCall:
    """One digest call, as reported to ``on_digest``."""

    rounds: tuple[int, ...]
    messages: list[ChatMessage]
    response: ChatResponse
    blocking: bool
    latency_s: float


DigestSink = Callable[[DigestCall], None]


def digest_messages(
    query: str, steps: Sequence[ActionStep], max_tokens: int, prompts: PromptSet
) -> list[ChatMessage]:
    """The digest request for ``steps`` (text only: images are not condensed)."""
    rounds = [
        {"round": s.round, "reply": _reply_text(s), "result": s.observation.text.strip()}
        for s in steps
    ]
    return [
        ChatMessage.text("system", prompts.render("digest_system", max_words=max_tokens * 2 // 3)),
        ChatMessage.text("user", prompts.render("digest_user", query=query, rounds=rounds)),
    ]


def _reply_text(step: ActionStep) -> str:
    """The reply as the digest reads it; a native call (outside the reply's text) included."""
    call = step.native_call
    if call is None:
        return step.reply.strip()
    return f"{step.reply.strip()} {call.name} {call.arguments}".strip()


def digest_text(reply: str, counter: TokenCounter, max_tokens: int) -> str:
    """The digest inside a reply's ``<digest>`` tag (or the bare reply), cut to ``max_tokens``."""
    reply = THINK_TAG.sub("", reply)
    match = DIGEST_TAG.search(reply)
    text = " ".join((match.group(1) if match else reply).split())
    while text and counter.text(text) > max_tokens:
        text = text[: int(len(text) * 0.9)].rstrip()
    return text or "(the digest came back empty)"


class SummaryPolicy(BudgetedPolicy):
    """Every evicted round is stood for by a digest shown (in round order) in the same call,
    or recorded as dropped; a digest written ahead is shown once all its rounds have left."""

    name = "summary"

    def __init__(
        self,
        budget: Budget,
        counter: TokenCounter,
        chat_model: ChatModel,
        *,
        on_digest: DigestSink | None = None,
        max_digest_tokens: int = MAX_DIGEST_TOKENS,
    ) -> None:
        super().__init__(budget, counter)
        self.chat_model = chat_model
        self.on_digest = on_digest
        self.max_digest_tokens = max_digest_tokens
        self.digests: list[Digest] = []
        self.digest_calls = 0
        self.digest_blocking = 0  # digest calls a build had to wait for
        self._pending: asyncio.Task[tuple[Digest, DigestCall]] | None = None
        self._evicted: set[int] = set()
        self._dropped_rounds: set[int] = set()

    async def settle(self) -> None:
        """Take in a background digest still in flight (its call was paid for, so it is
        counted and traced); its failure is logged, not raised: the session's ending stands."""
        try:
            await self._collect()
        except Sam3AgentError as e:
            self._pending = None
            logger.warning("a digest written ahead for a call that never came failed: %s", e)

    async def aclose(self) -> None:
        """Cancel a background digest nobody will read (the session stopped or failed)."""
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
        self._pending = None

    async def save_state(self) -> dict[str, Any]:
        """The state after a committed round; a background digest is awaited first, so that
        a resumed session neither asks for it again nor misses it."""
        await self._collect()
        return {
            "digests": [{"rounds": list(d.rounds), "text": d.text, "level": d.level}
                        for d in self.digests],
            "evicted": sorted(self._evicted),
            "dropped_rounds": sorted(self._dropped_rounds),
            "calls": self.digest_calls,
            "blocking": self.digest_blocking,
        }  # fmt: skip

    def restore_state(self, state: dict[str, Any]) -> None:
        self.digests = [
            Digest(tuple(int(r) for r in d["rounds"]), str(d["text"]), int(d["level"]))
            for d in state["digests"]
        ]
        self._evicted = {int(r) for r in state["evicted"]}
        self._dropped_rounds = {int(r) for r in state["dropped_rounds"]}
        self.digest_calls = int(state["calls"])
        self.digest_blocking = int(state["blocking"])

    async def _collect(self) -> float:
        """Take the background digest in (and report its call); seconds waited for it."""
        if self._pending is None:
            return 0.0
        wait_start = time.perf_counter()
        digest, call = await self._pending
        waited = time.perf_counter() - wait_start
        self._pending = None
        self._take_in(digest, call)
        return waited

    async def build(self, history: History) -> Context:
        started = time.perf_counter()
        waited = await self._collect()
        costs = self.measure(history)
        return self.conclude(history, costs, await self._choose(history, costs, waited), started)

    async def _choose(self, history: History, costs: Costs, waited: float) -> Decision:
        """The rounds kept and the digests shown (written now when not written ahead)."""
        steps = history.steps
        # Once evicted, a round stays out: its digest stands for it from then on.
        evict = [i for i, s in enumerate(steps) if s.round in self._evicted]
        evict = self._evict_more(costs, evict, self.budget.limit, self.budget.watermark_tokens)
        gone = {steps[i].round for i in evict}
        # A digest written ahead whose rounds did not all leave cannot stand for the ones
        # that did: it is discarded and those rounds are condensed again below.
        self.digests = [
            d for d in self.digests if set(d.rounds) <= gone or not set(d.rounds) & gone
        ]
        covered = self._covered_rounds()
        uncovered = [steps[i] for i in evict if steps[i].round not in covered]
        blocking = [s.round for s in uncovered]
        if uncovered:
            self._take_in(*await self._digest(history, uncovered, blocking=True))
        self._evicted.update(gone)
        shown = sorted(
            (d for d in self.digests if set(d.rounds) <= self._evicted), key=lambda d: d.rounds
        )
        kept = [i for i in range(len(steps)) if i not in set(evict)]
        dropped_digests: list[Digest] = []
        while shown and costs.total(kept, costs.note_tokens((), self._notes(shown, history))) > (
            self.budget.limit
        ):
            dropped_digests.append(shown.pop(0))
        # A dropped digest is gone for good: its rounds are never condensed again.
        self._dropped_rounds.update(r for d in dropped_digests for r in d.rounds)
        self.digests = [d for d in self.digests if d not in dropped_digests]
        evicted = [
            Evicted(
                steps[i].round,
                "budget: oldest first, its digest dropped for space"
                if steps[i].round in self._dropped_rounds
                else "budget: oldest first, condensed into a digest",
            )
            for i in evict
        ]
        self._start_speculative(history, costs, evict)
        return Decision(
            kept,
            notes=self._notes(shown, history),
            evicted=evicted,
            digests={
                "shown": [{"rounds": list(d.rounds), "level": d.level} for d in shown],
                "dropped": [list(d.rounds) for d in dropped_digests],
                "dropped_rounds": sorted(self._dropped_rounds & gone),
                "blocking_call_rounds": blocking,
                "waited_for_background_ms": round(waited * 1e3, 3),
                "calls_total": self.digest_calls,
            },
        )

    def _covered_rounds(self) -> set[int]:
        return {r for d in self.digests for r in d.rounds} | self._dropped_rounds

    def _notes(self, shown: Sequence[Digest], history: History) -> list[str]:
        if not shown:
            return []
        return [history.prompts.render("context_digests", texts=[d.note() for d in shown])]

    def _evict_more(self, costs: Costs, evict: Sequence[int], limit: int, target: int) -> list[int]:
        """``evict`` plus, past ``limit``, the oldest unprotected rounds until ``target`` fits
        (one digest condenses several), a digest's rounds together, a new one at its maximum."""
        steps = costs.history.steps
        out = set(evict)
        protected = costs.protected()
        covered = self._covered_rounds()
        index = {s.round: i for i, s in enumerate(steps)}

        def total() -> int:
            kept = [i for i in range(len(steps)) if i not in out]
            gone = {steps[i].round for i in out}
            notes = self._notes([d for d in self.digests if set(d.rounds) <= gone], costs.history)
            allowance = costs.note_tokens((), notes)
            if any(steps[i].round not in covered for i in out):
                allowance += self.max_digest_tokens + 40
            return costs.total(kept) + allowance

        def together(i: int) -> set[int]:
            """``i`` and the other rounds of the digest written ahead for it, if any."""
            for d in self.digests:
                if steps[i].round in d.rounds:
                    group = {index[r] for r in d.rounds if r in index}
                    return {i} if group & protected else group
            return {i}

        if total() <= limit:
            return sorted(out)
        for i in range(len(steps)):
            if total() <= target:
                break
            if i in protected or i in out:
                continue
            out |= together(i)
        return sorted(out)

    def _start_speculative(self, history: History, costs: Costs, evict: Sequence[int]) -> None:
        """Condense, in the background, what the next call will likely evict."""
        steps = history.steps
        if not steps:
            return
        growth = costs.rounds[-1]
        likely = self._evict_more(
            costs, evict, self.budget.limit - growth, self.budget.watermark_tokens - growth
        )
        covered = self._covered_rounds()
        ahead = [steps[i] for i in likely if i not in set(evict) and steps[i].round not in covered]
        if ahead:
            self._pending = asyncio.ensure_future(self._digest(history, ahead, blocking=False))

    async def _digest(
        self, history: History, steps: Sequence[ActionStep], *, blocking: bool
    ) -> tuple[Digest, DigestCall]:
        messages = digest_messages(
            history.task.query, steps, self.max_digest_tokens, history.prompts
        )
        started = time.perf_counter()
        response = await self.chat_model.complete(messages)
        latency = time.perf_counter() - started
        self.digest_calls += 1
        self.digest_blocking += int(blocking)
        rounds = tuple(s.round for s in steps)
        logger.debug("digest of rounds %s (%s)", rounds, "blocking" if blocking else "background")
        digest = Digest(rounds, digest_text(response.text, self.counter, self.max_digest_tokens))
        return digest, DigestCall(rounds, messages, response, blocking, latency)

    def _take_in(self, digest: Digest, call: DigestCall) -> None:
        self.digests.append(digest)
        # A background call is reported when it is taken in, not when it returns: the trace
        # then holds its record at the same place in an uninterrupted and a resumed session.
        if self.on_digest is not None:
            self.on_digest(call)
