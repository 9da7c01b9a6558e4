"""The agent loop end to end with a scripted chat model and a fake segmenter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.agent.context.sam3 import MAX_MESSAGES
from sam3_agent.agent.loop import RoundEvent, Sam3Agent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.messages import ChatMessage
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

SELECT_1 = tool("select_masks_and_return", final_answer_masks=[1])


def make_agent(
    replies: list[str],
    three_cats: Detections,
    *,
    verdicts: dict[int, str | list[str]] | None = None,
    **config: object,
) -> tuple[Sam3Agent, ScriptedChatModel, FakeSegmenter]:
    chat = ScriptedChatModel(replies=list(replies), verdicts=verdicts or {})
    seg = FakeSegmenter({"cat": three_cats, "animal": three_cats[[0, 1]]})
    return Sam3Agent(seg, chat, AgentConfig(**config)), chat, seg  # type: ignore[arg-type]


def assert_context_invariants(chat: ScriptedChatModel) -> None:
    """At every main-conversation call: at most two images (the raw image and the latest
    render), a bounded number of messages, and the same system prompt bytes."""
    system = chat.main_calls[0][0]
    for messages in chat.main_calls:
        assert messages[0] == system  # the same bytes every round: prefix caches can reuse it
        assert sum(len(m.images) for m in messages) <= 2
        assert len(messages) <= MAX_MESSAGES
        assert messages[1].images, "the raw image is always in the first user message"


def last_user_text(messages: list[ChatMessage]) -> str:
    return messages[-1].joined_text


def test_one_shot_select(image: np.ndarray, three_cats: Detections, tmp_path: Path) -> None:
    agent, chat, seg = make_agent([tool("segment_phrase", text_prompt="cat"), SELECT_1], three_cats)
    result = agent.run(image, "the top-left cat", output_dir=tmp_path)
    assert result.status == "masks"
    assert len(result.detections) == 1
    np.testing.assert_array_equal(result.detections.masks[0], three_cats.masks[0])
    assert result.rounds == 2
    assert result.usage.main.calls == 2 and result.usage.checks.calls == 0
    assert seg.embed_calls == 1 and seg.phrases == ["cat"]
    assert "3 masks" in last_user_text(chat.main_calls[1])
    assert_context_invariants(chat)


def test_select_several_masks_merges_repeats(image: np.ndarray, three_cats: Detections) -> None:
    agent, _, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=[3, 1, 3]),
        ],
        three_cats,
    )
    result = agent.run(image, "cats")
    assert result.detections.scores.tolist() == pytest.approx([0.9, 0.7])


def test_report_no_mask_first(image: np.ndarray, three_cats: Detections) -> None:
    agent, _chat, seg = make_agent([tool("report_no_mask")], three_cats)
    result = agent.run(image, "a giraffe")
    assert result.status == "no_mask"
    assert len(result.detections) == 0
    assert result.detections.image_size == image.shape[:2]
    assert seg.phrases == []


def test_duplicate_phrase_is_refused_without_calling_sam3(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, seg = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("segment_phrase", text_prompt=" CAT "),
            SELECT_1,
        ],
        three_cats,
    )
    result = agent.run(image, "cat")
    assert result.status == "masks"
    assert seg.phrases == ["cat"]
    refusal = last_user_text(chat.main_calls[2])
    assert "already used" in refusal and '"cat"' in refusal
    # The refusal is not an anchor: the image of the still-current masks stays visible.
    assert sum(len(m.images) for m in chat.main_calls[2]) == 2
    assert_context_invariants(chat)


def test_retries_grow_the_tried_phrases_note_in_order(
    image: np.ndarray, three_cats: Detections
) -> None:
    replies = [
        tool("segment_phrase", text_prompt="dog"),
        tool("segment_phrase", text_prompt="bird"),
        tool("segment_phrase", text_prompt="fish"),
        tool("segment_phrase", text_prompt="cat"),
        SELECT_1,
    ]
    agent, chat, _ = make_agent(replies, three_cats)
    assert agent.run(image, "the pet").status == "masks"
    first_user = [c[1].joined_text for c in chat.main_calls]
    assert "already sent" not in first_user[0] and "already sent" not in first_user[1]
    assert '"dog"' in first_user[2] and '"bird"' not in first_user[2]
    assert '"dog", "bird"' in first_user[3]
    assert '"dog", "bird", "fish"' in first_user[4]
    # Only the anchor round is kept after the first user message.
    assert len(chat.main_calls[4]) == 4
    assert_context_invariants(chat)


def test_prompts_are_byte_identical_across_runs(image: np.ndarray, three_cats: Detections) -> None:
    replies = [
        tool("segment_phrase", text_prompt="dog"),
        tool("segment_phrase", text_prompt="bird"),
        tool("segment_phrase", text_prompt="dog"),
        tool("segment_phrase", text_prompt="cat"),
        SELECT_1,
    ]
    runs = []
    for _ in range(2):
        agent, chat, _ = make_agent(replies, three_cats)
        agent.run(image, "pet")
        runs.append([[(m.role, m.joined_text) for m in call] for call in chat.main_calls])
    assert runs[0] == runs[1]


def test_examine_mixed_verdicts_renumbers_survivors(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("examine_each_mask"),
            tool("select_masks_and_return", final_answer_masks=[2]),
        ],
        three_cats,
        verdicts={2: "Wrong object. <verdict>Reject</verdict>"},
    )
    result = agent.run(image, "cats")
    assert len(chat.check_calls) == 3
    summary = last_user_text(chat.main_calls[2])
    assert "2 accepted, 1 rejected" in summary and "1, 3" in summary
    # New number 2 is the old mask 3 (score 0.7).
    assert result.detections.scores.tolist() == pytest.approx([0.7])
    assert result.usage.checks.calls == 3
    # The image of the masks before the check was replaced by text in the main context.
    texts = [m.joined_text for m in chat.main_calls[2]]
    assert any("replaced by a newer one" in t for t in texts)
    assert_context_invariants(chat)


def test_each_check_is_an_isolated_conversation(image: np.ndarray, three_cats: Detections) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
    )
    agent.run(image, "cats")
    numbers = []
    for call in chat.check_calls:
        assert [m.role for m in call] == ["system", "user"]
        assert len(call[1].images) == 3  # raw image, the mask on the image, the close-up
        assert "cats" in call[1].joined_text
        numbers.append(call[1].joined_text.split("mask ")[1].split()[0])
    assert sorted(numbers) == ["1", "2", "3"]


def test_examine_all_rejected_clears_masks(image: np.ndarray, three_cats: Detections) -> None:
    reject = "<verdict>Reject</verdict>"
    agent, chat, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("examine_each_mask"),
            SELECT_1,
            tool("report_no_mask"),
        ],
        three_cats,
        verdicts={1: reject, 2: reject, 3: reject},
    )
    result = agent.run(image, "a dog")
    assert result.status == "no_mask"
    assert "rejected every one" in last_user_text(chat.main_calls[2])
    assert "there are none" in last_user_text(chat.main_calls[3])
    for messages in chat.main_calls[2:]:
        # No stale image: the rejected masks cannot be selected, so their image is gone.
        assert sum(len(m.images) for m in messages) == 1
        assert "no longer shown" in messages[3].joined_text


def test_unclear_verdict_is_asked_again_once_then_rejected(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
        verdicts={
            1: ["Hmm, hard to say.", "Still unsure."],
            2: ["Unclear", "<verdict>accept</verdict>"],
        },
    )
    result = agent.run(image, "cats", output_dir=tmp_path)
    assert len(chat.check_calls) == 5  # masks 1 and 2 asked twice, mask 3 once
    summary = last_user_text(chat.main_calls[2])
    assert "2 accepted, 1 rejected" in summary and "2, 3" in summary
    retry = [c for c in chat.check_calls if len(c) == 4]
    assert len(retry) == 2 and "<verdict>Accept</verdict>" in retry[0][-1].joined_text
    assert result.usage.checks.calls == 5
    records = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    forced = [r for r in records if r["kind"] == "check" and r["forced_reject"]]
    assert [r["mask"] for r in forced] == [1]


def test_three_examines_in_a_row_keep_the_context_bounded(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat")] + [tool("examine_each_mask")] * 3 + [SELECT_1],
        three_cats,
    )
    assert agent.run(image, "cats").status == "masks"
    assert len(chat.check_calls) == 9
    assert len(chat.main_calls[-1]) == len(chat.main_calls[2]) == 6
    assert_context_invariants(chat)


def test_examine_after_zero_masks_is_corrected(image: np.ndarray, three_cats: Detections) -> None:
    agent, chat, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="unicorn"),
            tool("examine_each_mask"),
            tool("report_no_mask"),
        ],
        three_cats,
    )
    assert agent.run(image, "unicorn").status == "no_mask"
    assert "found no masks" in last_user_text(chat.main_calls[1])
    assert "needs current masks" in last_user_text(chat.main_calls[2])
    assert chat.check_calls == []


def test_examine_after_refused_duplicate_still_sees_current_masks(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("segment_phrase", text_prompt="cat"),
            tool("examine_each_mask"),
            SELECT_1,
        ],
        three_cats,
    )
    assert agent.run(image, "cat").status == "masks"
    assert len(chat.check_calls) == 3


def test_segment_phrase_mentioned_in_thinking_is_not_an_anchor(
    image: np.ndarray, three_cats: Detections
) -> None:
    sneaky = (
        "<think>I could call segment_phrase again, but first: "
        '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "dog"}}</tool></think>'
        '<tool>{"name": "examine_each_mask", "parameters": {}}</tool>'
    )
    agent, chat, seg = make_agent(
        [tool("segment_phrase", text_prompt="cat"), sneaky, SELECT_1], three_cats
    )
    assert agent.run(image, "cats").status == "masks"
    assert seg.phrases == ["cat"]
    assert len(chat.check_calls) == 3


MISTAKES = [
    ("no tool tag at all", "no tool call"),
    ("<tool>{not json}</tool>", "could not be read"),
    ('<tool>{"name": "zoom_in", "parameters": {}}</tool>', 'no tool named "zoom_in"'),
    (
        '<tool>{"name": "segment_phrase", "parameters": {}}</tool>',
        "missing parameter 'text_prompt'",
    ),
    (
        '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "x", "k": 3}}</tool>',
        "unexpected parameter 'k'",
    ),
    ('<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "  "}}</tool>', "blank"),
    (
        '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": "all"}}</tool>',
        "final_answer_masks",
    ),
    ('<tool>{"name": "examine_each_mask", "parameters": {}}</tool>', "cannot be the first tool"),
    (
        '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}</tool>',
        "cannot be the first tool",
    ),
]


@pytest.mark.parametrize(("reply", "expected"), MISTAKES)
def test_model_mistakes_get_a_corrective_message(
    image: np.ndarray, three_cats: Detections, reply: str, expected: str
) -> None:
    agent, chat, _ = make_agent(
        [reply, tool("segment_phrase", text_prompt="cat"), SELECT_1], three_cats
    )
    result = agent.run(image, "cat")
    assert result.status == "masks"
    assert expected in last_user_text(chat.main_calls[1])
    assert_context_invariants(chat)


@pytest.mark.parametrize(
    ("numbers", "expected"),
    [
        ([4], "Mask number 4 does not exist"),
        ([0, 9], "Mask numbers 0, 9 do not exist"),
        ([], "is empty"),
    ],
)
def test_bad_selections_are_corrected(
    image: np.ndarray, three_cats: Detections, numbers: list[int], expected: str
) -> None:
    agent, chat, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=numbers),
            SELECT_1,
        ],
        three_cats,
    )
    result = agent.run(image, "cat")
    assert result.status == "masks" and len(result.detections) == 1
    assert expected in last_user_text(chat.main_calls[2])
    assert "1 to 3" in last_user_text(chat.main_calls[2])


def test_only_the_latest_correction_is_kept(image: np.ndarray, three_cats: Detections) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), "oops", "oops again", "and again", SELECT_1],
        three_cats,
    )
    assert agent.run(image, "cat").status == "masks"
    assert len(chat.main_calls[-1]) == 6
    assert_context_invariants(chat)


def test_second_tool_call_is_cut_and_recorded(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    double = tool("segment_phrase", text_prompt="cat") + "\n" + tool("report_no_mask")
    agent, chat, _seg = make_agent([double, SELECT_1], three_cats)
    assert agent.run(image, "cat", output_dir=tmp_path).status == "masks"
    stored = chat.main_calls[1][2].joined_text
    assert "report_no_mask" not in stored
    first = json.loads((tmp_path / "trace.jsonl").read_text().splitlines()[0])
    assert "report_no_mask" in first["cut_after_first_tool"]


def test_max_rounds_ends_the_session_as_failed(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    phrases = ["dog", "bird", "fish", "cow", "horse"]
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt=p) for p in phrases], three_cats, max_rounds=3
    )
    result = agent.run(image, "pet", output_dir=tmp_path)
    assert result.status == "failed"
    assert result.rounds == 3 and len(chat.main_calls) == 3
    assert "max_rounds (3)" in (result.failure or "")
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["status"] == "failed" and saved["rounds"] == 3
    assert len((tmp_path / "trace.jsonl").read_text().splitlines()) == 3


def test_checks_do_not_count_as_rounds(image: np.ndarray, three_cats: Detections) -> None:
    agent, _chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
        max_rounds=3,
    )
    result = agent.run(image, "cat")
    assert result.status == "masks" and result.rounds == 3


def test_correction_budget_ends_the_session_as_failed(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, _ = make_agent(["no tool"] * 10, three_cats, max_corrections=2)
    result = agent.run(image, "cat")
    assert result.status == "failed"
    assert len(chat.main_calls) == 3
    assert "3 mistakes" in (result.failure or "")


def test_check_budget_refuses_examine(image: np.ndarray, three_cats: Detections) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
        max_mask_checks=2,
    )
    assert agent.run(image, "cat").status == "masks"
    assert chat.check_calls == []
    assert "used up" in last_user_text(chat.main_calls[2])


def test_checks_run_concurrently_within_the_bound(
    image: np.ndarray, three_cats: Detections
) -> None:
    agent, chat, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
        check_concurrency=2,
    )
    in_flight = 0
    peak = 0
    original = chat.complete

    async def counting(messages, *, tools=None):  # type: ignore[no-untyped-def]
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await original(messages, tools=tools)
        finally:
            in_flight -= 1

    chat.delay_s = 0.01
    chat.complete = counting  # type: ignore[method-assign]
    agent.run(image, "cat")
    assert peak == 2


def test_round_events_for_the_status_line(image: np.ndarray, three_cats: Detections) -> None:
    agent, _, _ = make_agent([tool("segment_phrase", text_prompt="cat"), SELECT_1], three_cats)
    events: list[RoundEvent] = []
    agent.run(image, "cat", on_round=events.append)
    assert [(e.round, e.tool, e.kind) for e in events] == [
        (1, "segment_phrase", "segment"),
        (2, "select_masks_and_return", "final"),
    ]


def test_outputs_are_written(image: np.ndarray, three_cats: Detections, tmp_path: Path) -> None:
    agent, _, _ = make_agent(
        [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1],
        three_cats,
    )
    result = agent.run(image, "cat", output_dir=tmp_path / "run")
    out = tmp_path / "run"
    document = json.loads((out / "result.json").read_text())
    assert document["status"] == "masks" and document["query"] == "cat"
    assert document["image"] == {"path": None, "height": 240, "width": 320}
    assert document["usage"]["checks"]["calls"] == 3
    restored = Detections.from_coco_rle(
        [m["rle"] for m in document["masks"]],
        [m["box_xyxy"] for m in document["masks"]],
        [m["score"] for m in document["masks"]],
        (240, 320),
    )
    np.testing.assert_array_equal(restored.masks, result.detections.masks)
    assert (out / "overlay.png").read_bytes().startswith(b"\x89PNG")
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    # Checks finish before the round that asked for them is recorded.
    assert [r["kind"] for r in records] == ["main", "check", "check", "check", "main", "main"]
    for record in records:
        for message in record["context"]:
            for part in message["content"]:
                if part["type"] in ("image", "file"):
                    assert (out / part["file"]).is_file()
    assert not list(out.glob("**/*.tmp"))


def test_phrases_with_path_characters_stay_inside_the_run_dir(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    seg_results = {"../../etc/x": three_cats, "masks_/a\\b": three_cats}
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="../../etc/x"),
            tool("segment_phrase", text_prompt="masks_/a\\b"),
            SELECT_1,
        ]
    )
    out = tmp_path / "runs" / "one"
    Sam3Agent(FakeSegmenter(seg_results), chat).run(image, "../x", output_dir=out)  # type: ignore[arg-type]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(out in p.parents for p in written)


def test_two_sessions_with_the_same_phrase_do_not_share_files(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    for name in ("a", "b"):
        agent, _, _ = make_agent([tool("segment_phrase", text_prompt="cat"), SELECT_1], three_cats)
        agent.run(image, "cat", output_dir=tmp_path / name)
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.jpg"))
    b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.jpg"))
    assert a == b and len(a) == 2


def test_image_inputs(three_cats: Detections, tmp_path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    for given in (path, str(path), Image.open(path), image):
        agent, _, _ = make_agent([tool("report_no_mask")], three_cats)
        assert agent.run(given, "x").image_size == (240, 320)


def test_missing_image_path_is_a_clear_error(three_cats: Detections, tmp_path: Path) -> None:
    agent, _, _ = make_agent([], three_cats)
    with pytest.raises(ImageLoadError, match="image not found"):
        agent.run(tmp_path / "nope.jpg", "cat")


def test_corrupt_image_is_a_clear_error(three_cats: Detections, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    agent, _, _ = make_agent([], three_cats)
    with pytest.raises(ImageLoadError, match="cannot read image"):
        agent.run(bad, "cat")


def test_empty_query_is_refused(image: np.ndarray, three_cats: Detections) -> None:
    agent, _, _ = make_agent([], three_cats)
    with pytest.raises(UserError, match="empty"):
        agent.run(image, "   ")


async def test_arun_inside_an_event_loop(image: np.ndarray, three_cats: Detections) -> None:
    agent, _, _ = make_agent([tool("report_no_mask")], three_cats)
    assert (await agent.arun(image, "x")).status == "no_mask"
    # The blocking form also works while a loop is running (notebooks).
    agent2, _, _ = make_agent([tool("report_no_mask")], three_cats)
    assert agent2.run(image, "x").status == "no_mask"


def test_native_tool_protocol(image: np.ndarray, three_cats: Detections) -> None:
    from sam3_agent.values.messages import ChatResponse, NativeToolCall

    def native(name: str, arguments: str) -> ChatResponse:
        return ChatResponse("<think>ok</think>", tool_calls=(NativeToolCall(name, arguments),))

    agent, chat, _ = make_agent(
        [
            native("segment_phrase", '{"text_prompt": "cat"}'),
            native("select_masks_and_return", "{oops"),
            native("select_masks_and_return", '{"final_answer_masks": [2]}'),
        ],
        three_cats,
        tool_protocol="native",
    )
    result = agent.run(image, "cat")
    assert result.status == "masks" and result.detections.scores.tolist() == pytest.approx([0.8])
    assert all(t is not None and len(t) == 4 for t in chat.tools_seen)
    assert "could not be read" in last_user_text(chat.main_calls[2])
    assert "tool-calling interface" in chat.main_calls[0][0].joined_text
    # Earlier calls are replayed as structured calls answered by tool messages (by id), the
    # image in a user message after the tool result, never as <tool> text.
    roles = [m.role for m in chat.main_calls[2]]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool"]
    first, answer, shown = chat.main_calls[2][2:5]
    assert first.tool_calls == (NativeToolCall("segment_phrase", '{"text_prompt": "cat"}'),)
    assert "<tool>" not in first.joined_text
    assert answer.tool_call_id == first.tool_calls[0].id != ""
    assert "3 masks" in answer.joined_text and not answer.images
    assert len(shown.images) == 1
    refused = chat.main_calls[2][5]
    assert refused.tool_calls[0].arguments == "{}"  # unreadable arguments are not replayed
    assert chat.main_calls[2][6].tool_call_id == refused.tool_calls[0].id != first.tool_calls[0].id
    assert_context_invariants(chat)


def test_reply_cut_by_the_token_limit_is_a_mistake(
    image: np.ndarray, three_cats: Detections
) -> None:
    from sam3_agent.values.messages import ChatResponse

    agent, chat, _ = make_agent(
        [ChatResponse("<think>so many thoughts", finish_reason="length"), tool("report_no_mask")],
        three_cats,
    )
    assert agent.run(image, "cat").status == "no_mask"
    assert "cut off by the length limit" in last_user_text(chat.main_calls[1])


def test_bad_image_leaves_no_output_directory(three_cats: Detections, tmp_path: Path) -> None:
    agent, _, _ = make_agent([], three_cats)
    with pytest.raises(ImageLoadError):
        agent.run(tmp_path / "missing.png", "cat", output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def read_outputs(out: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    """result.json and every trace record, read back as strict UTF-8 JSON."""
    result = json.loads((out / "result.json").read_bytes().decode("utf-8"))
    lines = (out / "trace.jsonl").read_bytes().decode("utf-8").splitlines()
    return result, [json.loads(line) for line in lines]


@pytest.mark.parametrize("protocol", ["tags", "native"])
@pytest.mark.parametrize(
    "arguments",
    ['{"final_answer_masks": [' + "9" * 4301 + "]}", "[" * 2000 + "]" * 2000],
    ids=["4301-digit integer", "2000 nested brackets"],
)
def test_json_python_cannot_decode_is_a_correction(
    image: np.ndarray, three_cats: Detections, tmp_path: Path, protocol: str, arguments: str
) -> None:
    from sam3_agent.values.messages import ChatResponse, NativeToolCall

    if protocol == "native":
        bad: object = ChatResponse("", tool_calls=(NativeToolCall("report_no_mask", arguments),))
        done: object = ChatResponse("", tool_calls=(NativeToolCall("report_no_mask", "{}"),))
    else:
        bad = f'<tool>{{"name": "report_no_mask", "parameters": {arguments}}}</tool>'
        done = tool("report_no_mask")
    chat = ScriptedChatModel(replies=[bad, done])  # type: ignore[list-item]
    agent = Sam3Agent(FakeSegmenter({}), chat, AgentConfig(tool_protocol=protocol))  # type: ignore[arg-type]
    result = agent.run(image, "cat", output_dir=tmp_path)
    assert result.status == "no_mask"
    correction = last_user_text(chat.main_calls[1])
    assert "could not be read" in correction and len(correction) < 1000
    read_outputs(tmp_path)


def test_lone_surrogates_from_model_and_user_are_written(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    agent, _, _ = make_agent(
        ["dog \ud83d", tool("segment_phrase", text_prompt="cat \udc00"), tool("report_no_mask")],
        three_cats,
    )
    result = agent.run(image, "the \ud83d cat", output_dir=tmp_path)
    assert result.status == "no_mask"
    document, records = read_outputs(tmp_path)
    assert document["query"] == "the \ud83d cat"  # escaped on disk, the same string read back
    assert records[0]["reply"] == "dog \ud83d"
    # pydantic refuses the phrase (not valid Unicode); the correction echoes it, on disk too.
    assert "cat \udc00" in records[1]["outcome"]["text"]  # type: ignore[index]


def test_outputs_follow_the_umask(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    import os
    import stat

    agent, _, _ = make_agent([tool("segment_phrase", text_prompt="cat"), SELECT_1], three_cats)
    agent.run(image, "cat", output_dir=tmp_path)
    mask = os.umask(0o022)
    os.umask(mask)
    expected = 0o666 & ~mask
    for name in ("result.json", "overlay.png", "trace.jsonl", "system_prompt.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == expected, name
    for image_file in (tmp_path / "images").iterdir():
        assert stat.S_IMODE(image_file.stat().st_mode) == expected


def test_echoes_of_the_model_input_are_bounded(image: np.ndarray, three_cats: Detections) -> None:
    huge = "x" * (1 << 20)
    replies = [
        tool("segment_phrase", text_prompt=huge),
        tool(huge),
        tool("select_masks_and_return", **{huge: 1}),
        f'<tool>{{"name": "report_no_mask", "{huge}": 1}}</tool>',
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[huge]),
        tool("report_no_mask"),
    ]
    agent, chat, _ = make_agent(replies, three_cats)
    assert agent.run(image, "cat").status == "no_mask"
    for call in chat.main_calls[1:]:
        assert len(last_user_text(call)) < 2000
        # Neither the corrections nor the replay of the refused replies grow with the input.
        assert sum(len(m.joined_text) for m in call[1:]) < 20_000


def test_a_stray_character_after_a_complete_call_costs_no_round(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    agent, _, _ = make_agent(
        ['<tool>{"name": "report_no_mask", "parameters": {}}}</tool>'], three_cats
    )
    result = agent.run(image, "cat", output_dir=tmp_path)
    assert result.status == "no_mask" and result.rounds == 1
    _, records = read_outputs(tmp_path)
    assert records[0]["ignored_after_json"] == "}"


def test_an_empty_reply_is_answered_as_empty(image: np.ndarray, three_cats: Detections) -> None:
    agent, chat, _ = make_agent(["", tool("report_no_mask")], three_cats)
    assert agent.run(image, "cat").status == "no_mask"
    correction = last_user_text(chat.main_calls[1])
    assert "was empty" in correction and "after your reasoning" not in correction


def test_no_file_work_on_the_event_loop(
    image: np.ndarray, three_cats: Detections, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlay, result.json, trace records and image saves all run in worker threads: a
    batch evaluation shares the loop between sessions."""
    import asyncio

    import sam3_agent.agent.checkpoint.store as store_module
    import sam3_agent.agent.rundir as rundir_module
    import sam3_agent.agent.trace as trace_module

    on_loop: list[str] = []

    def off_loop(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop.append(name)
            except RuntimeError:
                pass
            return fn(*args, **kwargs)

        return wrapper

    for module in (rundir_module, trace_module, store_module):
        monkeypatch.setattr(
            module, "atomic_write_bytes", off_loop("atomic_write_bytes", module.atomic_write_bytes)
        )
    for name in ("write_png", "atomic_write_json"):
        monkeypatch.setattr(rundir_module, name, off_loop(name, getattr(rundir_module, name)))
    monkeypatch.setattr(trace_module.Trace, "record", off_loop("record", trace_module.Trace.record))
    replies = [tool("segment_phrase", text_prompt="cat"), tool("examine_each_mask"), SELECT_1]
    agent, _, _ = make_agent(replies, three_cats)
    assert agent.run(image, "cat", output_dir=tmp_path).status == "masks"
    assert (tmp_path / "overlay.png").exists()
    assert on_loop == []


def test_round_records_are_built_by_keyword() -> None:
    from sam3_agent.agent.events import FinishedRound

    with pytest.raises(TypeError):
        FinishedRound(*range(10))  # type: ignore[misc]


def test_the_agent_core_needs_no_type_ignore() -> None:
    import sam3_agent.agent

    root = Path(sam3_agent.agent.__file__).parent
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line
    ]
    assert found == []
