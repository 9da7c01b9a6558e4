"""The agent loop with each context policy: what reaches the trace and result.json."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sam3_agent.agent.loop import STOPPED, Sam3Agent
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ChatModelError
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, is_digest_request, tool

SELECT_1 = tool("select_masks_and_return", final_answer_masks=[1])


def run(
    image: np.ndarray, cats: Detections, replies: list[str], out: Path, **config: object
) -> tuple[dict, list[dict], ScriptedChatModel]:  # type: ignore[type-arg]
    chat = ScriptedChatModel(replies=list(replies))
    seg = FakeSegmenter({"cat": cats, "animal": cats[[0, 1]]})
    agent = Sam3Agent(seg, chat, AgentConfig(**config))  # type: ignore[arg-type]
    agent.run(image, "only the cats on the left", output_dir=out)
    document = json.loads((out / "result.json").read_text())
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    return document, records, chat


MISTAKES = [tool("segment_phrase", text_prompt="dog"), tool("segment_phrase", text_prompt="cat")]
MISTAKES += ["no tool here " * 40] * 4 + [SELECT_1]


@pytest.mark.parametrize("policy", [p for p in CONTEXT_POLICIES if p != "attention"])
def test_every_policy_runs_a_session_and_logs_its_decisions(
    policy: str, image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    # Tight enough that the later rounds need eviction (keep-all gets room: it cannot evict).
    budget = 4000 if policy == "keep-all" else 2800
    document, records, _ = run(
        image, three_cats, MISTAKES, tmp_path, context_policy=policy, max_context_tokens=budget
    )
    assert document["status"] == "masks"
    assert document["context"]["policy"] == policy
    main = [r for r in records if r["kind"] == "main"]
    assert len(main) == len(MISTAKES)
    for record in main:
        log = record["context_policy"]
        assert log["policy"] == policy
        assert log["tokens_after"]["total"] <= log["budget"]["limit"]
        assert record["tokens_estimate"]["total"] == log["tokens_after"]["total"]
        assert len(record["tokens_estimate"]["per_message"]) == len(record["context"])
        assert record["usage"]["prompt_tokens"] == 100  # the endpoint's own count, beside it
    estimated = document["usage"]["estimated_prompt_tokens"]
    assert estimated["main"]["total"] == sum(r["tokens_estimate"]["total"] for r in main)
    assert estimated["main"]["image"] > 0 and estimated["source"] == "estimate"
    if policy in ("fifo", "decay", "summary"):
        assert any(r["context_policy"]["evicted"] for r in main)


def test_summary_digests_are_counted_apart(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    document, records, chat = run(
        image, three_cats, MISTAKES, tmp_path, context_policy="summary", max_context_tokens=2800
    )
    digests = [r for r in records if r["kind"] == "digest"]
    assert digests and len(chat.digest_calls) == len(digests)
    assert document["usage"]["digests"]["calls"] == len(digests)
    assert document["usage"]["main"]["calls"] == len(MISTAKES)
    assert document["usage"]["estimated_prompt_tokens"]["digests"]["text"] > 0
    assert document["usage"]["total"]["calls"] == len(MISTAKES) + len(digests)


def digest_accounting(
    image: np.ndarray, cats: Detections, rounds: int, ending: str, thinking: int, **config: object
) -> tuple[int, int, int, int]:
    """A summary session of ``rounds`` rounds, each reply thinking ``thinking`` words; its last
    round ends it (an answer, a mistake past the budget, or the last round allowed). The
    digest requests the model got; those in result.json's usage and calls; the trace's."""
    think = "<think>" + " ".join(f"idea{j}" for j in range(thinking)) + "</think>"
    replies = [think + tool("segment_phrase", text_prompt=f"cat {i}") for i in range(rounds)]
    if ending == "answer":
        replies[-1] = SELECT_1
    elif ending == "mistake":
        replies[-1] = "no tool here"
    chat = ScriptedChatModel(replies=replies)
    agent = Sam3Agent(
        FakeSegmenter(default=cats),
        chat,
        AgentConfig(context_policy="summary", max_rounds=rounds, max_corrections=0, **config),  # type: ignore[arg-type]
    )
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        agent.run(image, "only the cats on the left", output_dir=out)
        document = json.loads((out / "result.json").read_text())
        records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert document["rounds"] == rounds
    received = sum(is_digest_request(messages) for messages in chat.calls)
    usage = document["usage"]
    traced = sum(r["kind"] == "digest" for r in records)
    return received, usage["digests"]["calls"], usage["total"]["calls"] - rounds, traced


ENDINGS = st.sampled_from(["answer", "mistake", "rounds spent"])
DIGESTS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@DIGESTS
@given(rounds=st.integers(2, 14), budget=st.integers(2500, 3400), ending=ENDINGS)
@example(rounds=8, budget=2800, ending="answer")  # the last call's digest ahead was lost
def test_every_digest_request_is_counted_and_traced_at_a_tight_budget(
    image: np.ndarray, three_cats: Detections, rounds: int, budget: int, ending: str
) -> None:
    """The digest written ahead while the last call was in flight reached the model too: it
    is counted and traced though no call shows it (it was dropped when the session ended)."""
    received, counted, calls, traced = digest_accounting(
        image, three_cats, rounds, ending, 0, max_context_tokens=budget
    )
    assert received == counted == calls == traced


@DIGESTS
@given(rounds=st.integers(10, 16), thinking=st.integers(1400, 2400), ending=ENDINGS)
@example(rounds=10, thinking=1426, ending="answer")  # the last call's digest ahead was lost
def test_every_digest_request_is_counted_and_traced_at_the_default_budget(
    image: np.ndarray, three_cats: Detections, rounds: int, thinking: int, ending: str
) -> None:
    received, counted, calls, traced = digest_accounting(
        image, three_cats, rounds, ending, thinking
    )
    assert received == counted == calls == traced


class LastDigestChat(ScriptedChatModel):
    """Answers as scripted, but a digest asked once every main reply is out (the one written
    ahead for a call that will not come) never comes back, or fails."""

    def __init__(self, replies: list[str], *, fail: bool) -> None:
        super().__init__(replies=list(replies))
        self.fail = fail
        self.waiting = asyncio.Event()

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        if is_digest_request(messages) and not self.replies:
            self.waiting.set()
            if self.fail:
                raise ChatModelError("the endpoint is gone")
            await asyncio.Event().wait()
        return await super().complete(messages, tools=tools)


def awaited_by(task: asyncio.Task[object]) -> list[str]:
    """The coroutines ``task`` is suspended in, outermost first (``get_stack`` gives one)."""
    names, awaited = [], getattr(task.get_coro(), "cr_await", None)
    while awaited is not None and hasattr(awaited, "cr_code"):
        names.append(awaited.cr_code.co_name)
        awaited = awaited.cr_await
    return names


LAST_DIGEST_AHEAD = [tool("segment_phrase", text_prompt=f"cat {i}") for i in range(7)] + [SELECT_1]
"""At a 2800-token budget, the answer's call has a digest written ahead beside it."""


async def test_a_session_stopped_while_its_last_digest_is_written_stops(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    chat = LastDigestChat(LAST_DIGEST_AHEAD, fail=False)
    config = AgentConfig(context_policy="summary", max_context_tokens=2800)
    agent = Sam3Agent(FakeSegmenter(default=three_cats), chat, config)
    task = asyncio.create_task(agent.arun(image, "only the cats", output_dir=tmp_path))
    await chat.waiting.wait()
    # Stopped while the ended session takes that digest in, not earlier (its trace write).
    while not task.done() and "settle" not in awaited_by(task):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    assert task.cancelled()
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["failure"] == STOPPED and document["rounds"] == len(LAST_DIGEST_AHEAD)


def test_a_failed_digest_that_no_call_needed_leaves_the_answer(
    image: np.ndarray, three_cats: Detections, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chat = LastDigestChat(LAST_DIGEST_AHEAD, fail=True)
    config = AgentConfig(context_policy="summary", max_context_tokens=2800)
    agent = Sam3Agent(FakeSegmenter(default=three_cats), chat, config)
    result = agent.run(image, "only the cats", output_dir=tmp_path)

    assert chat.waiting.is_set()
    assert result.status == "masks"
    assert result.usage.digests.calls == len(chat.digest_calls)
    assert "the endpoint is gone" in caplog.text


def test_checks_tokens_are_estimated(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    replies = [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1]
    document, records, _ = run(image, three_cats, replies, tmp_path)
    checks = [r for r in records if r["kind"] == "check"]
    assert len(checks) == 3
    estimated = document["usage"]["estimated_prompt_tokens"]["checks"]
    assert estimated["image"] == sum(r["tokens_estimate"]["image"] for r in checks) > 0


def test_a_budget_too_small_for_the_pinned_context_fails_before_the_call(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    document, records, chat = run(
        image, three_cats, [SELECT_1], tmp_path, max_context_tokens=600, context_reserve_tokens=100
    )
    assert document["status"] == "failed"
    assert "context budget too small" in document["failure"]
    assert chat.main_calls == [] and records == []


def test_keep_all_ends_with_a_budget_failure_when_the_history_outgrows_it(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    replies = [tool("segment_phrase", text_prompt="cat")] + ["no tool here " * 200] * 6
    document, _, chat = run(
        image, three_cats, replies, tmp_path, context_policy="keep-all", max_context_tokens=3000
    )
    assert document["status"] == "failed" and "keep-all" in document["failure"]
    assert 1 < len(chat.main_calls) < len(replies)


@pytest.mark.parametrize("protocol", ["tags", "native"])
def test_tokens_are_estimated_without_an_output_directory(
    image: np.ndarray, three_cats: Detections, tmp_path: Path, protocol: str
) -> None:
    """The estimate is usage, not trace: a session that writes no files still counts it, and
    it counts the same as the trace of an identical session."""
    from sam3_agent.values.messages import ChatResponse, NativeToolCall

    def reply(name: str, **parameters: object) -> object:
        if protocol == "tags":
            return tool(name, **parameters)
        return ChatResponse("", tool_calls=(NativeToolCall(name, json.dumps(parameters)),))

    replies = [
        reply("segment_phrase", text_prompt="cat"),
        reply("examine_each_mask"),
        reply("select_masks_and_return", final_answer_masks=[1]),
    ]

    def session(out: Path | None) -> dict[str, dict[str, int]]:
        chat = ScriptedChatModel(replies=list(replies))  # type: ignore[arg-type]
        seg = FakeSegmenter({"cat": three_cats})
        agent = Sam3Agent(seg, chat, AgentConfig(tool_protocol=protocol))  # type: ignore[arg-type]
        return agent.run(image, "only the cats", output_dir=out).usage.estimated

    quiet, traced = session(None), session(tmp_path)
    assert quiet == traced
    assert quiet["main"]["text"] > 0 and quiet["main"]["image"] > 0
    assert quiet["checks"]["image"] > 0
