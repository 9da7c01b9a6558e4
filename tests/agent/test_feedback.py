"""Every feedback message (prompts/feedback.j2), rendered with edge-case arguments.

Counts of 0, 1 and many, lists of 0, 1 and several items, and echoed text that ends in a
period: no message may say "1 masks", "1 to 1", "all 1 masks", or double its punctuation.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from sam3_agent.agent import prompts

INTS = {"count": [0, 1, 2, 20], "total": [0, 1, 2, 20], "used": [0, 1, 2, 200]}
INT_LISTS = {"kept": [[], [2], [1, 3, 4]], "bad": [[5], [0, 7, 9]]}
STR_LISTS = {"tried": [[], ["cat"], ["cat", "dog", "red car"]], "names": [["a"], ["a", "b"]]}
STRINGS = ["cat", "a sentence that ends with a period."]
BAD_PATTERNS = [
    r"(?<!\.)\.\.(?!\.)",  # "..." is an ellipsis, ".." a doubled period
    r"[ ,:;]\.(?!\.)",
    r"\.\s+\.",
    r"\b1 masks\b",
    r"\b1 mask checks\b",
    r"\b1 to [01]\b",
    r"\ball [01] masks\b",
    r"\bthese [01] masks\b",
    r"\b0 to\b",
    r"  ",
    r"[Mm]asks from the previous numbering: \.",
]


def messages() -> list[str]:
    return sorted(name for name in prompts.default_prompt_set().feedback_macros() if name[0] != "_")


def argument_sets(name: str) -> list[dict[str, Any]]:
    macro = prompts.default_prompt_set().feedback_macros()[name]
    choices = []
    for arg in macro.arguments:
        values = INTS.get(arg) or INT_LISTS.get(arg) or STR_LISTS.get(arg) or STRINGS
        choices.append([(arg, v) for v in values])
    sets = [dict(combo) for combo in itertools.product(*choices)]
    # Only what the tools can send: never more accepted masks than were checked.
    return [s for s in sets if len(s.get("kept", [])) <= s.get("total", 10**6)]


def test_every_message_is_covered() -> None:
    assert len(messages()) >= 20
    assert "empty_reply" in messages()


@pytest.mark.parametrize("name", messages())
def test_message_reads_well_with_edge_case_arguments(name: str) -> None:
    for arguments in argument_sets(name):
        text = prompts.default_prompt_set().feedback(name, **arguments)
        assert text and text == text.strip()
        for pattern in BAD_PATTERNS:
            assert not re.search(pattern, text), (name, arguments, pattern, text)


def test_wording_of_singular_cases() -> None:
    assert "numbered 1." in prompts.default_prompt_set().feedback(
        "masks_found", phrase="cat", count=1
    )
    one = prompts.default_prompt_set().feedback("examined", total=1, kept=[1])
    assert "checked the only mask" in one and "renumbered 1;" in one
    assert "Expected: none; pass an empty object." in prompts.default_prompt_set().feedback(
        "bad_parameters", name="x", problems="p.", expected="none; pass an empty object."
    )


def test_empty_reply_says_the_reply_was_empty() -> None:
    text = prompts.default_prompt_set().feedback("empty_reply")
    assert "empty" in text and "after your reasoning" not in text


def test_refused_duplicate_says_how_phrases_are_compared() -> None:
    text = prompts.default_prompt_set().feedback(
        "duplicate_phrase", phrase="Red  Car", tried=["red car"]
    )
    assert "ignoring case" in text and "spaces" in text
