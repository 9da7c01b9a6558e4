from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.prompts import default_prompt_set
from sam3_agent.agent.tools import (
    TOOLS,
    SegmentPhraseParams,
    ToolMistake,
    mask_numbers_to_indices,
    normalize_phrase,
    tool_specs,
)
from sam3_agent.backends.schemas import SegmentRequest
from sam3_agent.backends.segment_args import MAX_PHRASE_CHARS, MAX_SEGMENT_PHRASE_CHARS
from sam3_agent.values.detections import Detections
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool


@pytest.mark.parametrize(
    ("numbers", "count", "indices"),
    [([1], 3, [0]), ([3, 1], 3, [0, 2]), ([2, 2, 2], 2, [1]), ([1, 2, 3], 3, [0, 1, 2])],
)
def test_one_based_numbers_become_zero_based_indices(
    numbers: list[int], count: int, indices: list[int]
) -> None:
    assert mask_numbers_to_indices(numbers, count, default_prompt_set()) == indices


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
        mask_numbers_to_indices(numbers, count, default_prompt_set())


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


def test_a_cut_phrase_is_reported_to_the_model(image: np.ndarray, three_cats: Detections) -> None:
    long_phrase = "cat sitting on the windowsill next to the blue vase"
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt=long_phrase),
            tool("segment_phrase", text_prompt="cat"),
            tool("report_no_mask"),
        ]
    )
    segmenter = FakeSegmenter({long_phrase: three_cats, "cat": three_cats}, max_words=3)
    Sam3Agent(segmenter, chat).run(image, "the cat")
    after_long, after_short = (call[-1].joined_text for call in chat.main_calls[1:3])
    assert 'only its beginning was used: "cat sitting on"' in after_long
    assert "found 3 masks" in after_long
    assert "only its beginning" not in after_short


def test_phrase_length_rule_is_shared_with_the_service() -> None:
    schema = tool_specs(TOOLS)[0].parameters["properties"]["text_prompt"]
    assert schema["maxLength"] == MAX_PHRASE_CHARS and "30 words" in schema["description"]
    longest, too_long = "a" * MAX_PHRASE_CHARS, "a" * (MAX_PHRASE_CHARS + 1)
    SegmentPhraseParams(text_prompt=longest)
    SegmentRequest(image_id="0" * 64, phrases=[longest])
    with pytest.raises(ValidationError):
        SegmentPhraseParams(text_prompt=too_long)
    # Segmenters (in-process and the service alike) take longer text, e.g. a query
    # segmented as it is; the tool's bound is the one a model sees.
    SegmentRequest(image_id="0" * 64, phrases=[too_long])
    with pytest.raises(ValidationError):
        SegmentRequest(image_id="0" * 64, phrases=["a" * (MAX_SEGMENT_PHRASE_CHARS + 1)])
