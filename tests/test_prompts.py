from __future__ import annotations

import jinja2
import pytest

from sam3_agent import prompts
from sam3_agent.agent import Sam3Agent
from sam3_agent.tools import TOOLS


def test_system_prompt_teaches_the_protocol_and_every_tool() -> None:
    agent = Sam3Agent(segmenter=None, chat_model=None)  # type: ignore[arg-type]
    text = agent.system_prompt
    for name in TOOLS:
        assert name in text
    for tag in ("<think>", "</think>", "<tool>", "</tool>"):
        assert tag in text
    assert "first tool call must be segment_phrase or report_no_mask" in text


def test_checker_prompt_names_the_verdict_format() -> None:
    text = prompts.render("checker_system")
    assert "<verdict>Accept</verdict>" in text and "<verdict>Reject</verdict>" in text


def test_missing_variable_is_an_error() -> None:
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("user_task", query="x")
    with pytest.raises(jinja2.UndefinedError):
        prompts.feedback("masks_found", phrase="cat")


def test_unknown_feedback_is_an_error() -> None:
    with pytest.raises(KeyError):
        prompts.feedback("nothing_like_this")


def test_rendering_is_deterministic() -> None:
    a = prompts.render("user_task", query="q", tried_phrases=["b", "a", "c"])
    b = prompts.render("user_task", query="q", tried_phrases=["b", "a", "c"])
    assert a == b and a.index('"b"') < a.index('"a"') < a.index('"c"')


@pytest.mark.parametrize(
    ("message", "variables", "expected"),
    [
        ("masks_found", {"phrase": "cat", "count": 1}, "found 1 mask."),
        ("masks_found", {"phrase": "cat", "count": 2}, "found 2 masks."),
        ("numbers_out_of_range", {"bad": [5], "count": 2}, "Mask number 5 does not exist"),
    ],
)
def test_feedback_grammar(message: str, variables: dict[str, object], expected: str) -> None:
    assert expected in prompts.feedback(message, **variables)
