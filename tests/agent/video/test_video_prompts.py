"""The video agent's templates and its checker's verdicts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.agent import prompts
from sam3_agent.agent.parsing import parse_frame_range, parse_verdict
from sam3_agent.agent.tools import TOOLS, tool_docs
from sam3_agent.agent.video.agent import VIDEO_TOOLS
from sam3_agent.values.errors import UserError


def test_the_video_set_overrides_only_what_video_says_differently() -> None:
    image = prompts.load_prompt_set()
    video = prompts.load_prompt_set(kind="video", tool_docs=tool_docs(VIDEO_TOOLS))
    assert video.sources["context_archive.j2"] == image.sources["context_archive.j2"]
    assert video.sources["system.j2"] != image.sources["system.j2"]
    assert "Uncertain" in video.render("checker_system")
    system = video.render("system", tools=tool_docs(VIDEO_TOOLS), protocol="tags")
    assert "track" in system and "sheet" in system
    # The same tool names: the tag protocol and parsing carry over.
    assert list(VIDEO_TOOLS) == list(TOOLS)


def test_a_custom_set_without_video_templates_takes_the_canonical_ones(tmp_path: Path) -> None:
    canonical = Path(prompts.canonical_dir())  # type: ignore[arg-type]
    custom = tmp_path / "mine"
    shutil.copytree(canonical, custom, ignore=shutil.ignore_patterns("video"))
    (custom / "user_task.j2").write_text('Request: "{{ query }}" {{ tried_phrases|length }}')
    video = prompts.load_prompt_set(custom, kind="video")
    assert (
        video.sources["checker_user.j2"]
        == prompts.load_prompt_set(kind="video").sources["checker_user.j2"]
    )
    # A set's own video folder is checked like the rest.
    (custom / "video").mkdir()
    (custom / "video" / "checker_user.j2").write_text("{{ query }} {{ nonsense }}")
    with pytest.raises(UserError, match="nonsense"):
        prompts.load_prompt_set(custom, kind="video")


@pytest.mark.parametrize(
    ("text", "allow", "expected"),
    [
        ("<verdict>Uncertain</verdict>", True, "uncertain"),
        ("<verdict>Uncertain</verdict>", False, None),
        ("<think><verdict>Accept</verdict></think><verdict>unsure</verdict>", True, "uncertain"),
        ("<verdict>Accept or Uncertain</verdict>", True, None),
        ("<verdict>Reject</verdict>", True, "reject"),
    ],
)
def test_uncertain_is_a_verdict_only_where_allowed(
    text: str, allow: bool, expected: str | None
) -> None:
    assert parse_verdict(text, allow_uncertain=allow) == expected


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["-", " to ", ".."]))
def test_frame_ranges_are_read_in_either_order(a: int, b: int, sep: str) -> None:
    assert parse_frame_range(f"x <frames>{a}{sep}{b}</frames>") == (min(a, b), max(a, b))


@given(st.text(max_size=80))
def test_any_reply_gives_a_range_or_none(text: str) -> None:
    found = parse_frame_range(text)
    assert found is None or found[0] <= found[1]
