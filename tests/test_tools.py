from __future__ import annotations

import pytest

from sam3_agent.tools import (
    TOOLS,
    ToolMistake,
    mask_numbers_to_indices,
    normalize_phrase,
    tool_specs,
)


@pytest.mark.parametrize(
    ("numbers", "count", "indices"),
    [([1], 3, [0]), ([3, 1], 3, [0, 2]), ([2, 2, 2], 2, [1]), ([1, 2, 3], 3, [0, 1, 2])],
)
def test_one_based_numbers_become_zero_based_indices(
    numbers: list[int], count: int, indices: list[int]
) -> None:
    assert mask_numbers_to_indices(numbers, count) == indices


@pytest.mark.parametrize(
    ("numbers", "count", "message"),
    [
        ([], 3, "is empty"),
        ([0], 3, "Mask number 0 does not exist"),
        ([4, -1, 4], 3, "-1, 4 do not"),
    ],
)
def test_bad_numbers_are_mistakes(numbers: list[int], count: int, message: str) -> None:
    with pytest.raises(ToolMistake, match=message):
        mask_numbers_to_indices(numbers, count)


@pytest.mark.parametrize(
    ("a", "b"),
    [("Cat", "cat"), ("  red   car ", "red car"), ("CAFÉ", "café"), ("Straße", "STRASSE")],
)
def test_phrases_compare_case_folded_and_whitespace_collapsed(a: str, b: str) -> None:
    assert normalize_phrase(a) == normalize_phrase(b)


def test_registry_has_the_four_tools_with_schemas() -> None:
    assert list(TOOLS) == [
        "segment_phrase",
        "examine_each_mask",
        "select_masks_and_return",
        "report_no_mask",
    ]
    specs = {s.name: s for s in tool_specs()}
    assert specs["segment_phrase"].parameters["required"] == ["text_prompt"]
    assert specs["segment_phrase"].parameters["additionalProperties"] is False
    assert (
        specs["select_masks_and_return"].parameters["properties"]["final_answer_masks"]["type"]
        == "array"
    )
