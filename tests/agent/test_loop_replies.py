"""The README's promise, "model mistakes never crash a run", for any reply at all.

Hypothesis drives the whole agent loop (scripted chat model, fake segmenter, an output
directory) with arbitrary replies: any text (lone surrogates included), and text built from
the protocol's own pieces (tags, JSON, a 4,301-digit integer, 2,000 nested brackets), in the
tag protocol; arbitrary structured calls (any name, any arguments) in the native one. Every
run must end with a valid status and leave result.json and trace.jsonl readable.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.messages import ChatResponse, NativeToolCall
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, square_mask

H, W = 48, 64
# Any code point, lone surrogates included (st.text() leaves them out by default).
ANY_CHARACTER = st.one_of(st.characters(), st.characters(categories=["Cs"]))
ANY_TEXT = st.text(ANY_CHARACTER)
CAT = '{"name": "segment_phrase", "parameters": {"text_prompt": "cat"}}'
FRAGMENTS = [
    "<tool>",
    "</tool>",
    "<think>",
    "</think>",
    CAT,
    '{"name": "examine_each_mask", "parameters": {}}',
    '{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1, 2]}}',
    '{"name": "report_no_mask"}',
    '{"name": ',
    '"parameters": ',
    '{"final_answer_masks": [',
    "9" * 4301,
    "[" * 2000,
    "]" * 2000,
    "{" * 1500,
    "}",
    "]",
    '"',
    "\\ud83d",
    "\ud83d",
    "```json",
    "1e999",
    "null",
]

fragment_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(ANY_CHARACTER, max_size=20)), max_size=8
).map("".join)
reply_text = st.one_of(ANY_TEXT, fragment_text)
native_call = st.builds(
    NativeToolCall,
    name=st.one_of(
        st.sampled_from(["segment_phrase", "examine_each_mask", "select_masks_and_return"]),
        st.text(ANY_CHARACTER, max_size=30),
    ),
    arguments=reply_text,
)
native_reply = st.builds(
    lambda text, calls: ChatResponse(text, tool_calls=tuple(calls)),
    reply_text,
    st.lists(native_call, max_size=3),
)


def cats() -> Detections:
    masks = np.stack([square_mask(H, W, 2, 2, 10), square_mask(H, W, 20, 30, 12)])
    return Detections.from_masks(masks, [0.9, 0.8])


def run_session(replies: list[str | ChatResponse], protocol: str) -> None:
    chat = ScriptedChatModel(replies=list(replies))
    config = AgentConfig(tool_protocol=protocol, max_rounds=len(replies), max_corrections=3)
    agent = Sam3Agent(FakeSegmenter({"cat": cats()}), chat, config)  # type: ignore[arg-type]
    image = np.full((H, W, 3), 128, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        result = agent.run(image, "the cat \ud83d", output_dir=out)
        assert result.status in ("masks", "no_mask", "failed")
        document = json.loads((out / "result.json").read_bytes().decode("utf-8"))
        assert document["status"] == result.status
        records = (out / "trace.jsonl").read_bytes().decode("utf-8").splitlines()
        assert len([r for r in map(json.loads, records) if r["kind"] == "main"]) == result.rounds
        assert (out / "overlay.png").stat().st_size > 0


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(reply_text, min_size=1, max_size=5))
def test_any_reply_text_ends_the_run_cleanly(replies: list[str]) -> None:
    run_session([*replies], "tags")


@SETTINGS
@given(st.lists(st.one_of(native_reply, reply_text), min_size=1, max_size=5))
def test_any_native_call_ends_the_run_cleanly(replies: list[str | ChatResponse]) -> None:
    run_session(replies, "native")


@SETTINGS
@given(st.lists(reply_text, min_size=0, max_size=3))
def test_replies_after_a_good_start_end_the_run_cleanly(replies: list[str]) -> None:
    # Masks exist, so select/examine with odd arguments reach their handlers too.
    run_session([f"<tool>{CAT}</tool>", *replies], "tags")
