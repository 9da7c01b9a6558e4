"""The agent loop with each context policy: what reaches the trace and result.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

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
