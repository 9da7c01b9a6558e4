"""A session resumed after a kill sends what the uninterrupted one sent, for every policy.

Policies with state (``summary``'s digests, ``auto``'s mode) commit it with each round and
digest calls are journaled like every other call, so a kill anywhere, a digest call
included, changes no request, asks nothing twice and ends the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, is_digest_request, tool
from tests.support.resume import Killed, KilledAt

QUERY = "only the cats on the left"
ROUND = re.compile(r"\[round (\d+)\] assistant")
SCRIPT = [
    tool("segment_phrase", text_prompt="dog"),
    tool("segment_phrase", text_prompt="cat"),
    *[f"round {n}: the flag is on the left sleeve, no tool here " * 12 for n in range(3, 13)],
    tool("segment_phrase", text_prompt="animal"),
    *[f"round {n}: mask 2 is a cushion, no tool here " * 12 for n in range(14, 18)],
    tool("select_masks_and_return", final_answer_masks=[1]),
]
BUDGET = 3300  # tight: summary condenses, auto switches, hierarchical archives


class DigestOfRounds(ScriptedChatModel):
    """Digests that name the rounds they condense, so a wrong digest shows in the context."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        if is_digest_request(messages):
            rounds = ROUND.findall(messages[1].joined_text)
            self.digest_reply = f"<digest>rounds {' '.join(rounds)} tried things</digest>"
        return await super().complete(messages, tools=tools)


def config(policy: str) -> AgentConfig:
    return AgentConfig(
        context_policy=policy, max_context_tokens=BUDGET, max_corrections=30, max_rounds=40
    )


def segmenter(cats: Detections) -> FakeSegmenter:
    return FakeSegmenter({"cat": cats, "animal": cats[[0, 1]]})


def records(out: Path) -> list[dict[str, Any]]:
    """Trace records without their timings."""
    found = []
    for line in (out / "trace.jsonl").read_text().splitlines():
        record = {k: v for k, v in json.loads(line).items() if k not in ("latency_s", "round_s")}
        log = record.get("context_policy")
        if isinstance(log, dict):
            log.pop("latency_ms", None)
            if log.get("digests"):
                log["digests"].pop("waited_for_background_ms", None)
        found.append(record)
    return found


def uninterrupted(
    policy: str, image: np.ndarray, cats: Detections, out: Path
) -> tuple[dict[str, Any], DigestOfRounds]:
    chat = DigestOfRounds(replies=list(SCRIPT))
    result = Sam3Agent(segmenter(cats), chat, config(policy)).run(image, QUERY, output_dir=out)
    return result.to_json(), chat


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "timings_s"}


@pytest.mark.parametrize("policy", [p for p in CONTEXT_POLICIES if p != "attention"])
def test_a_session_killed_anywhere_resumes_to_the_uninterrupted_one(
    policy: str, image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    expected, reference = uninterrupted(policy, image, three_cats, tmp_path / "reference")
    assert expected["status"] == ("failed" if policy == "keep-all" else "masks")
    if policy == "summary":
        assert reference.digest_calls  # the budget is tight enough to condense
    # Every call the session makes, main, check or digest, is a kill point; a sample of them
    # for the stateless policies, all of them for those that keep state.
    points = range(1, len(reference.calls) + 1)
    if policy not in ("summary", "auto"):
        points = range(1, len(reference.calls) + 1, 7)
    for at in points:
        out = tmp_path / f"killed-at-{at}"
        chat = DigestOfRounds(replies=list(SCRIPT))
        killed = Sam3Agent(segmenter(three_cats), KilledAt(chat, at), config(policy))  # type: ignore[arg-type]
        with pytest.raises(Killed):
            killed.run(image, QUERY, output_dir=out)
        resumed = Sam3Agent(segmenter(three_cats), chat, config(policy))
        result = resumed.run(image, QUERY, output_dir=out, resume=True)
        # Over both processes, the model was asked exactly what the uninterrupted run asked,
        # in the same order, each once: no request with another context, none repeated.
        assert chat.calls == reference.calls, f"killed at call {at}"
        assert comparable(result.to_json()) == comparable(expected), f"killed at call {at}"
        assert records(out) == records(tmp_path / "reference"), f"killed at call {at}"
