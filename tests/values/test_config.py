"""Settings refuse bad values with one line naming the setting: checks declared on the fields
(:func:`~sam3_agent.values.config.setting`), the same messages for every settings value."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.backends.generation import GenerationSettings
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError

REFUSALS: list[tuple[type, dict[str, Any], str]] = [
    (AgentConfig, {"max_rounds": 0}, "`max_rounds` must be >= 1, got 0"),
    (AgentConfig, {"max_corrections": -1}, "`max_corrections` must be >= 0, got -1"),
    (AgentConfig, {"max_mask_checks": -2}, "`max_mask_checks` must be >= 0, got -2"),
    (AgentConfig, {"check_concurrency": 0}, "`check_concurrency` must be >= 1, got 0"),
    (AgentConfig, {"verdict_retries": -1}, "`verdict_retries` must be >= 0, got -1"),
    (AgentConfig, {"score_threshold": 1.5}, "`score_threshold` must be in [0, 1], got 1.5"),
    (AgentConfig, {"overlap_threshold": -0.1}, "`overlap_threshold` must be in [0, 1], got -0.1"),
    (AgentConfig, {"max_image_side": 0}, "`max_image_side` must be >= 1, got 0"),
    (AgentConfig, {"jpeg_quality": 101}, "`jpeg_quality` must be in [1, 100], got 101"),
    (AgentConfig, {"max_image_pixels": 0}, "`max_image_pixels` must be >= 1, got 0"),
    (
        AgentConfig,
        {"tool_protocol": "json"},
        "`tool_protocol` must be 'tags' or 'native', got 'json'",
    ),
    (
        AgentConfig,
        {"context_policy": "lru"},
        "`context_policy` must be one of sam3, keep-all, fifo, decay, summary, hierarchical, "
        "attention, auto, got 'lru'",
    ),
    (
        AgentConfig,
        {"context_reserve_tokens": -1},
        "`context_reserve_tokens` must be >= 0, got -1",
    ),
    (
        AgentConfig,
        {"max_context_tokens": 1024},
        "`max_context_tokens` (1024) must exceed the reply reserve (`context_reserve_tokens=1024`)",
    ),
    (AgentConfig, {"context_watermark": 0.0}, "`context_watermark` must be in (0, 1], got 0.0"),
    (AgentConfig, {"decay_rate": -0.5}, "`decay_rate` must be >= 0, got -0.5"),
    (
        AgentConfig,
        {"decay_weights": (("segment", -1.0),)},
        "`decay_weights`: expected kinds segment, examine, correction with weights >= 0, "
        "got 'segment'=-1.0",
    ),
    (AgentConfig, {"attention_window": 0}, "`attention_window` must be >= 1, got 0"),
    (VideoOptions, {"frames_shown": 17}, "`frames_shown` must be between 1 and 16, got 17"),
    (VideoOptions, {"check_frames": 0}, "`check_frames` must be between 1 and 16, got 0"),
    (VideoOptions, {"uncertain_looks": 5}, "`uncertain_looks` must be between 0 and 4, got 5"),
    (FrameSelection, {"stride": 0}, "`stride` must be >= 1, got 0"),
    (FrameSelection, {"max_frames": 0}, "`max_frames` must be >= 1, got 0"),
    (FrameSelection, {"start_s": -1.0}, "`start_s` must be a time in seconds >= 0, got -1.0"),
    (FrameSelection, {"end_s": math.inf}, "`end_s` must be a time in seconds >= 0, got inf"),
    (FrameSelection, {"start_s": 2.0, "end_s": 1.0}, "`end_s` (1.0) must be after `start_s` (2.0)"),
    (FrameSelection, {"fps": math.nan}, "`fps` must be a positive number, got nan"),
    (
        BackendSpec,
        {"sam3_url": "ftp://x"},
        "`sam3_url` must be an http:// or https:// URL, got 'ftp://x'",
    ),
    (BackendSpec, {"sam3": " "}, "`sam3` must name a hub id or a local directory"),
    (BackendSpec, {"sam3_cache_size": 0}, "`sam3_cache_size` must be >= 1, got 0"),
    (BackendSpec, {"video_cache_mb": -1}, "`video_cache_mb` must be >= 0, got -1"),
    (BackendSpec, {"llm_timeout": 0.0}, "`llm_timeout` must be a number of seconds > 0, got 0.0"),
    (GenerationSettings, {"temperature": math.nan}, "`temperature` must be in [0, 2], got nan"),
    (GenerationSettings, {"max_tokens": 0}, "`max_tokens` must be >= 1, got 0"),
    (GenerationSettings, {"seed": -1}, "`seed` must be in [0, 2**63), got -1"),
]


def _make(kind: type, values: dict[str, Any]) -> None:
    made = kind(**values)
    if isinstance(made, BackendSpec):
        made.validate(chat=False)


@pytest.mark.parametrize(("kind", "values", "message"), REFUSALS)
def test_each_bad_setting_is_one_line_naming_it(
    kind: type, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as caught:
        _make(kind, values)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("kind", "checked"),
    [
        (
            AgentConfig,
            {
                "max_rounds", "max_corrections", "max_mask_checks", "check_concurrency",
                "verdict_retries", "score_threshold", "overlap_threshold", "max_image_side",
                "jpeg_quality", "max_image_pixels", "tool_protocol", "tool_set", "context_policy",
                "context_reserve_tokens", "context_watermark", "decay_rate", "attention_window",
            },
        ),
        (VideoOptions, {"frames_shown", "check_frames", "uncertain_looks"}),
        (FrameSelection, {"stride", "max_frames", "start_s", "end_s", "fps"}),
        (BackendSpec, {"sam3_url", "sam3_cache_size", "video_cache_mb", "llm_timeout"}),
        (GenerationSettings, {"temperature", "max_tokens", "seed"}),
    ],
)  # fmt: skip
def test_single_setting_checks_are_declared_on_the_fields(kind: type, checked: set[str]) -> None:
    assert {f.name for f in fields(kind) if "check" in f.metadata} == checked
    for f in fields(kind):
        if "check" in f.metadata:
            test, _, optional = f.metadata["check"]
            assert (optional and f.default is None) or test(f.default), f.name


@given(
    st.integers(max_value=0),
    st.sampled_from(["max_rounds", "check_concurrency", "attention_window"]),
)
def test_any_count_under_one_is_refused_with_its_value(value: int, name: str) -> None:
    with pytest.raises(UserError) as caught:
        AgentConfig(**{name: value})
    assert str(caught.value) == f"`{name}` must be >= 1, got {value}"
