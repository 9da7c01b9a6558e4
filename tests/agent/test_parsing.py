from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.agent.parsing import ToolCall, parse_native, parse_reply, parse_verdict
from sam3_agent.values.messages import NativeToolCall

SEG = '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "cat"}}</tool>'


def test_first_call_is_parsed_and_the_rest_cut() -> None:
    second = '<tool>{"name": "report_no_mask", "parameters": {}}</tool>'
    parsed = parse_reply(f"<think>look</think>{SEG}\nthen {second}")
    assert parsed.call == ToolCall("segment_phrase", {"text_prompt": "cat"})
    assert parsed.stored_text.endswith(SEG)
    assert parsed.cut is not None and "report_no_mask" in parsed.cut
    assert parsed.thinking == "look"


def test_tool_tags_inside_thinking_are_not_executed() -> None:
    reply = (
        '<think>maybe <tool>{"name": "segment_phrase", "parameters": {"text_prompt": "x"}}'
        '</tool> no</think><tool>{"name": "report_no_mask", "parameters": {}}</tool>'
    )
    assert parse_reply(reply).call == ToolCall("report_no_mask", {})


def test_lone_closing_think_tag_marks_the_end_of_reasoning() -> None:
    parsed = parse_reply(f"reasoning from the template</think>{SEG}")
    assert parsed.thinking == "reasoning from the template"
    assert parsed.call is not None


@pytest.mark.parametrize(
    ("reply", "truncated", "mistake"),
    [
        ("I will segment the cat.", False, "no_tool"),
        ("<think>thinking about <tool> tags", False, "no_tool"),
        ('<tool>{"name": "report_no_mask"', False, "unclosed_tool"),
        ('<tool>{"name": "report_no_mask"', True, "truncated"),
        ("<think>long thoughts", True, "truncated"),
        ("<tool>{name: segment_phrase}</tool>", False, "invalid_json"),
        ("<tool>[1, 2]</tool>", False, "invalid_json"),
        ('<tool>{"parameters": {}}</tool>', False, "invalid_json"),
        ('<tool>{"name": "x", "parameters": [1]}</tool>', False, "invalid_json"),
        ('<tool>{"name": "x", "args": {}}</tool>', False, "invalid_json"),
    ],
)
def test_protocol_mistakes_are_named(reply: str, truncated: bool, mistake: str) -> None:
    parsed = parse_reply(reply, truncated=truncated)
    assert parsed.call is None
    assert parsed.mistake == mistake


def test_json_error_detail_is_kept_for_the_correction() -> None:
    parsed = parse_reply("<tool>{name: 1}</tool>")
    assert "position" in parsed.detail


@pytest.mark.parametrize(
    "payload",
    [
        '```json\n{"name": "report_no_mask", "parameters": {}}\n```',
        '{"name": "report_no_mask"}',
        '{"name": "report_no_mask", "parameters": null}',
    ],
)
def test_lenient_forms_that_are_unambiguous(payload: str) -> None:
    assert parse_reply(f"<tool>{payload}</tool>").call == ToolCall("report_no_mask", {})


def test_native_calls_take_the_first_and_record_the_rest() -> None:
    calls = (
        NativeToolCall("segment_phrase", '{"text_prompt": "cat"}'),
        NativeToolCall("report_no_mask", "{}"),
    )
    parsed = parse_native("thinking", calls)
    assert parsed.call == ToolCall("segment_phrase", {"text_prompt": "cat"})
    assert parsed.cut is not None and "report_no_mask" in parsed.cut
    assert parsed.stored_text.startswith("thinking<tool>")


def test_native_invalid_arguments_are_a_mistake() -> None:
    parsed = parse_native("", (NativeToolCall("segment_phrase", "{oops"),))
    assert parsed.mistake == "invalid_json"


def test_native_without_calls_falls_back_to_tags() -> None:
    assert parse_native(SEG, ()).call == ToolCall("segment_phrase", {"text_prompt": "cat"})


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("<verdict>Accept</verdict>", "accept"),
        ("<verdict>accept</verdict>", "accept"),
        ("<verdict>REJECT</verdict>", "reject"),
        ("<verdict> I accept this mask. </verdict>", "accept"),
        ("<verdict>Rejected</verdict>", "reject"),
        ("<think><verdict>Accept</verdict>?</think><verdict>Reject</verdict>", "reject"),
        ("<verdict>Accept</verdict> hmm <verdict>Reject</verdict>", "reject"),
        ("<verdict>accept or reject</verdict>", None),
        ("<verdict>maybe</verdict>", None),
        ("Accept", None),
        ("", None),
    ],
)
def test_verdicts(text: str, verdict: str | None) -> None:
    assert parse_verdict(text) == verdict


def test_several_think_blocks_around_tool_calls() -> None:
    reply = (
        "<think>a</think>"
        '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "cat"}}</tool>'
        '<think>b</think><tool>{"name": "report_no_mask", "parameters": {}}</tool>'
    )
    parsed = parse_reply(reply)
    assert parsed.call == ToolCall("segment_phrase", {"text_prompt": "cat"})
    assert parsed.cut is not None and "report_no_mask" in parsed.cut


HUGE_INT = "9" * 4301
DEEP = "[" * 2000 + "]" * 2000


@pytest.mark.parametrize(
    "parameters",
    [f'{{"final_answer_masks": [{HUGE_INT}]}}', f'{{"final_answer_masks": {DEEP}}}'],
    ids=["4301-digit integer", "2000 nested brackets"],
)
def test_json_python_cannot_read_is_a_mistake_in_both_protocols(parameters: str) -> None:
    tagged = parse_reply(
        f'<tool>{{"name": "select_masks_and_return", "parameters": {parameters}}}</tool>'
    )
    assert tagged.mistake == "invalid_json" and tagged.call is None
    assert 0 < len(tagged.detail) < 100
    native = parse_native("", (NativeToolCall("select_masks_and_return", parameters),))
    assert native.mistake == "invalid_json" and native.call is None
    assert 0 < len(native.detail) < 100
    assert native.native_call is not None and native.native_call.arguments == "{}"


def test_stray_characters_after_a_complete_call_are_ignored_and_recorded() -> None:
    parsed = parse_reply('<tool>{"name": "report_no_mask", "parameters": {}}}</tool>')
    assert parsed.call == ToolCall("report_no_mask", {})
    assert parsed.mistake is None and parsed.ignored == "}"
    native = parse_native("", (NativeToolCall("segment_phrase", '{"text_prompt": "cat"}  ]'),))
    assert native.call == ToolCall("segment_phrase", {"text_prompt": "cat"})
    assert native.ignored == "  ]"
    # What is replayed to the API is valid JSON again.
    assert native.native_call is not None
    assert json.loads(native.native_call.arguments) == {"text_prompt": "cat"}
    assert parse_reply('<tool>{"name": "report_no_mask"}\n</tool>').ignored is None


@pytest.mark.parametrize("reply", ["", "   \n\t"])
def test_an_empty_reply_is_named_as_such(reply: str) -> None:
    assert parse_reply(reply).mistake == "empty_reply"
    assert parse_native(reply, ()).mistake == "empty_reply"
    assert parse_reply(reply, truncated=True).mistake == "truncated"


@given(st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]))))
def test_any_text_parses_without_raising(text: str) -> None:
    for candidate in (text, f"<tool>{text}</tool>", f'<tool>{{"name": "x"}}{text}</tool>'):
        parsed = parse_reply(candidate)
        assert (parsed.call is None) != (parsed.mistake is None)
    parsed = parse_native(text, (NativeToolCall(text, text),))
    assert (parsed.call is None) != (parsed.mistake is None)


def test_deep_nesting_is_refused_whatever_the_recursion_limit():
    """Some libraries raise the interpreter's recursion limit; our own depth limit decides."""
    import sys

    from sam3_agent.agent.parsing import MAX_JSON_DEPTH, decode_json

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        deep = "[" * 2000 + "]" * 2000
        assert decode_json(deep).problem == "it is nested too deeply to read"
        ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
        assert decode_json(ok).problem == ""
        # Brackets inside strings are text, not nesting.
        assert decode_json(json.dumps({"text_prompt": "[" * 5000})).problem == ""
    finally:
        sys.setrecursionlimit(old)
