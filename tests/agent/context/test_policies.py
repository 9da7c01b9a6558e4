"""Context policies: the shared invariants over random sessions, then each policy's rules."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.agent.checkpoint.journal import Journal, JournaledChatModel
from sam3_agent.agent.context.attention import AttentionPolicy, require_source, round_sizes
from sam3_agent.agent.context.hierarchical import AutoPolicy, HierarchicalPolicy
from sam3_agent.agent.context.policy import BudgetedPolicy, DecayPolicy, FifoPolicy, KeepAllPolicy
from sam3_agent.agent.context.registry import POLICIES, PolicyInputs, build_policy
from sam3_agent.agent.context.sam3 import MAX_MESSAGES, Sam3Policy
from sam3_agent.agent.context.summary import DigestCall, SummaryPolicy
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import (
    Budget,
    ContextBudgetError,
    Costs,
    History,
    record_of,
    tried_before,
)
from sam3_agent.agent.steps import current_masks_index
from sam3_agent.backends.response_cache import CachedChatModel
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.errors import UserError
from sam3_agent.values.messages import ChatMessage
from tests.support.context_histories import SYSTEM, Spec, history, make_steps, task
from tests.support.fakes import ScriptedChatModel

COUNTER = TokenCounter()


class FakeAttention:
    """Attention that favours later messages (deterministic)."""

    def __init__(self) -> None:
        self.recording = False

    def record_attention(self) -> None:
        self.recording = True

    def last_message_attention(self, messages: object = None) -> list[float] | None:
        n = 12
        weights = [float(i + 1) for i in range(n)]
        return [w / sum(weights) for w in weights]


def make_policy(name: str, budget: Budget, chat: ScriptedChatModel | None = None):  # type: ignore[no-untyped-def]
    config = AgentConfig(
        context_policy=name if name != "attention" else "sam3",
        max_context_tokens=budget.max_context_tokens,
        context_reserve_tokens=budget.reserve_tokens,
    )
    if name == "attention":
        return AttentionPolicy(budget, COUNTER, FakeAttention())
    return build_policy(PolicyInputs(config, COUNTER, chat or ScriptedChatModel()))


def images_after_request(messages: Sequence[ChatMessage]) -> list[object]:
    return [img for m in messages[2:] for img in m.images]


specs = st.lists(
    st.builds(
        Spec,
        kind=st.sampled_from(["segment", "examine", "correction"]),
        shows_masks=st.booleans(),
        words=st.integers(0, 120),
    ),
    max_size=30,
)


@pytest.mark.parametrize("protocol", ["tags", "native"])
@pytest.mark.parametrize("name", CONTEXT_POLICIES)
@settings(max_examples=25, deadline=None)
@given(
    spec=specs,
    max_tokens=st.sampled_from([1500, 2500, 4000, 8000]),
    side=st.sampled_from([224, 448, 672]),
)
def test_invariants_over_random_sessions(
    name: str, protocol: str, spec: list[Spec], max_tokens: int, side: int
) -> None:
    """Every policy, every call of a session: the invariants of sam3_agent.agent.context.policy."""
    budget = Budget(max_tokens, reserve_tokens=256)
    policy = make_policy(name, budget)
    native = protocol == "native"
    full = history(spec, side, native=native)

    async def session() -> None:
        for n in range(len(full.steps) + 1):
            h = History(full.system_prompt, full.task, full.steps[:n])
            try:
                context = await policy.build(h)
            except ContextBudgetError as e:
                costs = Costs(COUNTER, h)
                # Only when even the pinned part (for keep-all: the whole history) cannot fit;
                # sam3, hierarchical and auto pin the note of every other phrase tried.
                protected = sorted(costs.protected())
                needed = costs.full() if name == "keep-all" else costs.total(protected)
                if name in ("sam3", "hierarchical", "auto"):
                    needed += costs.note_tokens(tried_before(h.steps, protected))
                assert needed > budget.limit
                assert "budget" in str(e) and "\n" not in str(e)
                return
            messages = context.messages
            assert messages[0] == ChatMessage.text("system", SYSTEM)  # same bytes every call
            assert messages[1].images == [full.task.image]
            assert f'"{full.task.query}"' in messages[1].joined_text  # the request is present
            assert sum(len(m.images) for m in messages) <= 2
            current = current_masks_index(h.steps)
            expected = [] if current is None else [h.steps[current].observation.image]
            assert images_after_request(messages) == expected  # selectable masks, none stale
            record = record_of(context)
            # Rounds whole and in order, each starting at its reply: (assistant, user) with
            # tags; (assistant, tool) and a user message with the image, natively.
            kept = [i for i, s in enumerate(h.steps) if s.round in record.kept_rounds]
            rounds = [
                h.steps[i].messages(
                    with_image=i == current, masks_gone=current is None, prompts=h.prompts
                )
                for i in kept
            ]
            assert messages[2:] == [m for r in rounds for m in r]
            assert round_sizes(messages) == [len(r) for r in rounds]
            for r in rounds:
                roles = [m.role for m in r]
                if native:
                    assert roles in (["assistant", "tool"], ["assistant", "tool", "user"])
                    assert r[1].tool_call_id == r[0].tool_calls[0].id
                else:
                    assert roles == ["assistant", "user"]
            assert len(messages) <= 2 + 2 * len(kept) + int(native)
            if name == "sam3":
                assert len(messages) <= MAX_MESSAGES
            assert COUNTER.messages(messages).total == record.tokens_after.total
            assert record.tokens_after.total <= budget.limit
            assert record.kept_rounds == sorted(record.kept_rounds)
            evicted = {e.round for e in record.evicted}
            assert evicted.isdisjoint(record.kept_rounds)
            assert sorted(evicted | set(record.kept_rounds)) == [s.round for s in h.steps]
        await policy.aclose()

    asyncio.run(session())


def test_every_name_builds_a_policy() -> None:
    assert tuple(POLICIES) == CONTEXT_POLICIES
    for name in CONTEXT_POLICIES:
        if name != "attention":
            assert make_policy(name, Budget(8000)).name == name


STATEFUL = {"summary", "auto", "attention"}


@pytest.mark.parametrize("name", CONTEXT_POLICIES)
def test_every_policy_offers_the_whole_interface_without_probing(name: str) -> None:
    """save_state/restore_state/settle/aclose are declared on ContextPolicy; the base gives
    the stateless policies their defaults, so the loop calls them on any policy."""
    policy = make_policy(name, Budget(8000))
    assert isinstance(policy, BudgetedPolicy)

    async def lifecycle() -> dict[str, object] | None:
        await policy.build(history([Spec("segment", True), Spec("examine")]))
        await policy.settle()
        state = await policy.save_state()
        if state is not None:
            make_policy(name, Budget(8000)).restore_state(state)
        await policy.aclose()
        return state

    state = asyncio.run(lifecycle())
    assert (state is not None) == (name in STATEFUL)


def test_unknown_policy_is_a_user_error() -> None:
    with pytest.raises(UserError, match="`context_policy` must be one of"):
        AgentConfig(context_policy="lru")
    with pytest.raises(UserError, match="must exceed the reply reserve"):
        AgentConfig(max_context_tokens=500, context_reserve_tokens=500)
    with pytest.raises(UserError, match="`context_reserve_tokens` must be >= 0"):
        AgentConfig(context_reserve_tokens=-1)
    assert AgentConfig(context_reserve_tokens=0).context_reserve_tokens == 0


def test_attention_refuses_a_backend_without_attention() -> None:
    with pytest.raises(UserError, match="needs the in-process transformers MLLM") as err:
        require_source(ScriptedChatModel())
    assert "\n" not in str(err.value)


def build(policy: object, h: History):  # type: ignore[no-untyped-def]
    return asyncio.run(policy.build(h))  # type: ignore[attr-defined]


LONG = [Spec("segment", True, 60)] + [Spec("correction", words=80) for _ in range(8)]


def test_attention_is_found_behind_the_journal_and_the_response_cache(tmp_path: Path) -> None:
    class AttendingModel(FakeAttention):
        name = "hf-model"

    model = AttendingModel()
    cached = CachedChatModel(model, tmp_path / "c.sqlite")  # type: ignore[arg-type]
    journaled = JournaledChatModel(cached, Journal(tmp_path / "calls.jsonl", 1, []))
    assert require_source(journaled) is model
    assert require_source(cached) is model


def test_pinned_part_too_large_is_a_budget_failure() -> None:
    h = history([Spec("segment", True)], side=1008)
    for policy in (Sam3Policy(Budget(1500, 256), COUNTER), FifoPolicy(Budget(1500, 256), COUNTER)):
        with pytest.raises(ContextBudgetError, match="minus the 256-token reply reserve"):
            build(policy, h)


def test_keep_all_keeps_every_round_and_fails_past_the_budget() -> None:
    h = history(LONG)
    context = build(KeepAllPolicy(Budget(20000), COUNTER), h)
    assert context.kept_rounds == list(range(1, 10))
    with pytest.raises(ContextBudgetError, match="keep-all"):
        build(KeepAllPolicy(Budget(2000, 256), COUNTER), h)


def test_fifo_evicts_oldest_but_keeps_the_selectable_masks() -> None:
    h = history(LONG)
    context = build(FifoPolicy(Budget(2000, 256), COUNTER), h)
    record = record_of(context)
    assert 1 in context.kept_rounds  # round 1 shows the selectable masks
    evicted = [e.round for e in record.evicted]
    assert evicted and evicted == list(range(2, 2 + len(evicted)))  # oldest first
    assert record.tokens_before > record.tokens_after.total


def test_decay_scores_only_when_eviction_is_needed() -> None:
    roomy = record_of(build(DecayPolicy(Budget(20000), COUNTER), history(LONG)))
    assert roomy.scores is None and not roomy.evicted
    specs = [Spec("segment", True, 10), Spec("examine", False, 60)] + [
        Spec("correction", words=60) for _ in range(6)
    ]
    weights = {"segment": 1.0, "examine": 1.5, "correction": 0.3}
    tight = record_of(build(DecayPolicy(Budget(1300, 256), COUNTER, weights), history(specs)))
    assert tight.scores is not None
    evicted = [e.round for e in tight.evicted]
    # Corrections weighed 0.3, the examine 1.5: old corrections go before the older examine.
    assert 2 not in evicted and 3 in evicted
    kept_scores = [tight.scores[r] for r in tight.kept_rounds]
    assert max(e.score or 0.0 for e in tight.evicted) <= min(kept_scores)


def test_decay_weights_are_configurable() -> None:
    specs = [Spec("segment", True, 10), Spec("examine", False, 60)] + [
        Spec("correction", words=60) for _ in range(6)
    ]
    weights = {"segment": 1.0, "examine": 0.01, "correction": 1.0}
    record = record_of(build(DecayPolicy(Budget(1300, 256), COUNTER, weights), history(specs)))
    assert 2 in [e.round for e in record.evicted]


def test_hierarchical_archives_past_the_watermark_only() -> None:
    specs = [Spec("segment", True, 40), Spec("segment", True, 40), Spec("examine", True, 40)]
    specs += [Spec("segment", True, 40), Spec("correction", words=40)]
    h = history(specs)
    roomy = record_of(build(HierarchicalPolicy(Budget(20000), COUNTER), h))
    assert not roomy.evicted and roomy.zones is not None and roomy.zones["archive"] == 0
    tight_policy = HierarchicalPolicy(Budget(1400, 256, watermark=0.7), COUNTER)
    context = build(tight_policy, h)
    record = record_of(context)
    assert record.zones is not None
    assert {e.reason for e in record.evicted} == {"watermark: moved to archive"}
    assert sorted(e.round for e in record.evicted) == [1, 2, 3]  # before the latest search
    assert context.kept_rounds == [4, 5]
    request = context.messages[1].joined_text
    assert "Earlier rounds, condensed" in request and "round 1: result 1." in request
    assert '"phrase 1"' in request  # the tried phrases stay pinned
    assert record.zones["archive"] > 0 and record.zones["pinned"] > 0
    assert record.zones["reserve"] == 256


def test_auto_switches_past_the_watermark_without_flip_flop() -> None:
    policy = AutoPolicy(Budget(2000, 256, watermark=0.6), COUNTER)
    specs = [Spec("segment", True, 10)] + [Spec("correction", words=w) for w in (10, 300, 5)]
    specs += [Spec("correction", words=5), Spec("segment", True, 5), Spec("correction", words=5)]
    h = history(specs)
    modes, switches = [], []
    for n in range(len(h.steps) + 1):
        record = record_of(build(policy, History(h.system_prompt, h.task, h.steps[:n])))
        modes.append(record.mode)
        if record.switch:
            switches.append(record.switch["round"])
    # Round 4 passes the watermark; round 5 is back under it but must wait a round.
    assert modes == ["sam3"] * 3 + ["hierarchical"] * 2 + ["sam3"] * 3
    assert switches == [4, 6]
    assert policy.switches[0]["from"] == "sam3" and policy.switches[1]["to"] == "sam3"


def digest_chat() -> ScriptedChatModel:
    return ScriptedChatModel(digest_reply="<digest>tried phrase 2: 3 masks; not the dog</digest>")


def test_summary_replaces_evicted_rounds_by_a_digest_counted_apart() -> None:
    chat = digest_chat()
    calls: list[DigestCall] = []
    policy = SummaryPolicy(Budget(2000, 256), COUNTER, chat, on_digest=calls.append)
    context = build(policy, history(LONG))
    record = record_of(context)
    assert record.evicted and calls and calls[0].blocking
    assert "not the dog" in context.messages[1].joined_text
    assert record.digests is not None and record.digests["shown"][0]["level"] == 1
    assert chat.main_calls == []  # digests never go through the main conversation
    assert len(chat.digest_calls) == len(calls)
    # The digest request holds the rounds' own text, never an earlier digest.
    assert "result 2." in calls[0].messages[1].joined_text


def test_summary_never_summarises_a_digest() -> None:
    chat = digest_chat()
    policy = SummaryPolicy(Budget(2000, 256), COUNTER, chat)
    full = history(LONG + [Spec("correction", words=80) for _ in range(6)])

    async def session() -> None:
        for n in range(len(full.steps) + 1):
            await policy.build(History(full.system_prompt, full.task, full.steps[:n]))
        await policy.aclose()

    asyncio.run(session())
    assert len(chat.digest_calls) >= 2
    for messages in chat.digest_calls:
        assert "not the dog" not in messages[1].joined_text
    assert all(d.level == 1 for d in policy.digests)


def test_summary_condenses_ahead_while_the_main_call_is_in_flight() -> None:
    chat = digest_chat()
    policy = SummaryPolicy(Budget(2600, 256), COUNTER, chat)
    full = history(LONG + [Spec("correction", words=80) for _ in range(6)])

    async def session() -> tuple[int, int]:
        for n in range(len(full.steps) + 1):
            await policy.build(History(full.system_prompt, full.task, full.steps[:n]))
            await asyncio.sleep(0)  # the main call is in flight: the loop runs other tasks
        await policy.aclose()
        return policy.digest_calls, policy.digest_blocking

    calls, blocking = asyncio.run(session())
    assert calls > blocking  # some digests were written in the background


def test_attention_evicts_the_least_attended_round() -> None:
    policy = AttentionPolicy(Budget(2000, 256), COUNTER, FakeAttention(), window=2)
    policy.observe([0.1, 0.1, 0.0, 0.0, 0.4, 0.4] + [0.0] * 20, [2, 3, 4, 5, 6, 7, 8])
    policy.observe([0.1, 0.1, 0.0, 0.0, 0.4, 0.4] + [0.0] * 20, [2, 3, 4, 5, 6, 7, 8])
    assert policy.smoothed(2) == 0.0 and policy.smoothed(3) == pytest.approx(0.8)
    assert policy.smoothed(9) == float("inf")  # never seen: kept as long as possible
    record = record_of(build(policy, history(LONG)))
    evicted = [e.round for e in record.evicted]
    assert evicted[0] == 2 and 3 not in evicted[:1]
    assert record.scores is not None and record.scores[2] == 0.0


class ShareOfEachMessage:
    """Attention that puts message j's share at j (of the request it is asked about)."""

    def record_attention(self) -> None:
        pass

    def last_message_attention(self, messages: Sequence[ChatMessage] | None = None) -> list[float]:
        return [float(j) for j in range(len(messages or ()))]


def test_attention_maps_native_rounds_of_three_messages() -> None:
    """A native round showing its image is assistant, tool, user: all three are its mass."""
    policy = AttentionPolicy(Budget(20000), COUNTER, ShareOfEachMessage())
    specs = [Spec("segment", True), Spec("correction"), Spec("examine", True)]
    h = history(specs, native=True)
    context = build(policy, h)
    roles = [m.role for m in context.messages]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 2 + ["assistant", "tool", "user"]
    assert round_sizes(context.messages) == [2, 2, 3]
    build(policy, h)  # reads the attention of the call above
    assert policy.smoothed(1) == 2 + 3 and policy.smoothed(2) == 4 + 5
    assert policy.smoothed(3) == 6 + 7 + 8


def test_sam3_policy_matches_the_pure_pruning() -> None:
    from sam3_agent.agent.context.sam3 import build_context

    h = history([Spec("segment", True), Spec("segment", True), Spec("correction")])
    context = build(Sam3Policy(Budget(32768), COUNTER), h)
    assert context.messages == build_context(h.system_prompt, h.task, h.steps).messages
    assert record_of(context).tried_phrases == ["phrase 1"]


def test_policies_do_not_mutate_the_history() -> None:
    steps = make_steps(LONG)
    before = list(steps)
    for name in CONTEXT_POLICIES:
        policy = make_policy(name, Budget(1900 if name != "keep-all" else 9000, 256), digest_chat())
        build(policy, History(SYSTEM, task(), steps))
    assert steps == before
