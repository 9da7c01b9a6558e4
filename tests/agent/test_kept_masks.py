"""``keep_masks`` (the extended tools): answers that span phrases, the kept set surviving every
context policy, renders, checkpoints and the inspector."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.tools import EXTENDED_TOOLS, TOOLS
from sam3_agent.apps.inspector import summary
from sam3_agent.apps.inspector.model import load_run
from sam3_agent.media.drawing import KEPT_COLOR
from sam3_agent.media.render import Renderer
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections
from tests.conftest import H, W
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, square_mask, tool
from tests.support.resume import Killed, KilledAt, comparable, trace_records

QUERY = "the man, his dog and the ball"
TIGHT = 3100  # tokens: the extended system prompt, the request and two or three rounds


def found(*squares: tuple[int, int, int], scores: tuple[float, ...] = ()) -> Detections:
    masks = np.stack([square_mask(H, W, y, x, side) for y, x, side in squares])
    return Detections.from_masks(masks, list(scores or [0.9 - 0.1 * i for i in range(len(masks))]))


MAN = found((10, 10, 40), (150, 250, 30))  # the man, and a poster of a man
DOGS = found((100, 100, 40), (180, 20, 30))
BALL = found((60, 200, 20))
# The man again, a little larger: the same object as the kept one (IoU 0.64), merged.
MAN_AGAIN = found((10, 10, 50))
SEGMENTS = {"man": MAN, "dog": DOGS, "ball": BALL, "person": MAN_AGAIN}

SCRIPT = [
    tool("segment_phrase", text_prompt="man"),
    tool("keep_masks", masks=[1]),
    tool("segment_phrase", text_prompt="dog"),
    tool("keep_masks", masks=[2, 1]),
    tool("segment_phrase", text_prompt="person"),
    tool("keep_masks", masks=[1]),  # the man again: merged into K1
    tool("segment_phrase", text_prompt="ball"),
    tool("select_masks_and_return", final_answer_masks=[1]),
]


def expected_union() -> list[np.ndarray]:
    """The answer: the man (merged with his larger mask), both dogs, the ball."""
    man = MAN.masks[0] | MAN_AGAIN.masks[0]
    return [man, DOGS.masks[0], DOGS.masks[1], BALL.masks[0]]


def run(config: AgentConfig, image: np.ndarray, **options: Any) -> tuple[Any, ScriptedChatModel]:
    chat = ScriptedChatModel(replies=list(SCRIPT))
    agent = Sam3Agent(FakeSegmenter(dict(SEGMENTS)), chat, config)
    return agent.run(image, QUERY, **options), chat


def request_text(call: list[Any]) -> str:
    """The first user message of a main call: the request and its pinned notes."""
    return next(m for m in call if m.role == "user").joined_text


@pytest.mark.parametrize("tight", [False, True], ids=["default", "tight"])
@pytest.mark.parametrize("policy", CONTEXT_POLICIES)
def test_three_phrases_answer_with_the_kept_set_under_every_policy(
    policy: str, tight: bool, image: np.ndarray
) -> None:
    if policy == "attention":
        pytest.skip("attention needs the in-process transformers MLLM")
    if policy == "keep-all" and tight:
        pytest.skip("keep-all never evicts: a budget too small for every round fails it")
    budget = {"max_context_tokens": TIGHT} if tight else {}
    config = AgentConfig(tool_set="extended", context_policy=policy, **budget)  # type: ignore[arg-type]
    result, chat = run(config, image)
    assert result.status == "masks"
    assert [m.tolist() for m in result.detections.masks] == [m.tolist() for m in expected_union()]
    calls = chat.main_calls
    assert len(calls) == len(SCRIPT)
    # Every call after the first keep names the kept set, whatever the policy left out.
    assert 'K1 (from "man")' in request_text(calls[2])
    last = request_text(calls[-1])
    assert 'K1 (from "man"), K2 (from "dog"), K3 (from "dog")' in last
    assert "K4" not in last  # the man found again joined K1
    assert "Kept mask 1 as K1; 3 masks are kept in all" in calls[6][-1].joined_text
    assert "Kept mask 1 as K2, mask 2 as K3; 3 masks are kept in all" in calls[4][-1].joined_text
    if tight:  # rounds were left out, the keep rounds among them; the note stayed
        assert len(calls[-1]) < 2 + 2 * (len(SCRIPT) - 1)


def test_an_empty_selection_answers_with_the_kept_masks_alone(image: np.ndarray) -> None:
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="man"),
            tool("select_masks_and_return", final_answer_masks=[]),  # refused: nothing kept
            tool("keep_masks", masks=[1]),
            tool("segment_phrase", text_prompt="cat"),  # finds nothing; the kept set stays
            tool("select_masks_and_return", final_answer_masks=[]),
        ]
    )
    config = AgentConfig(tool_set="extended")
    result = Sam3Agent(FakeSegmenter(dict(SEGMENTS)), chat, config).run(image, QUERY)
    assert "at least one mask number" in chat.main_calls[2][-1].joined_text
    assert result.status == "masks" and len(result.detections) == 1
    assert np.array_equal(result.detections.masks[0], MAN.masks[0])


def test_the_paper_tools_have_no_kept_set(image: np.ndarray) -> None:
    assert "keep_masks" not in TOOLS and "keep_masks" in EXTENDED_TOOLS
    assert (
        list(EXTENDED_TOOLS).index("keep_masks")
        == list(EXTENDED_TOOLS).index("examine_each_mask") + 1
    )
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="man"),
            tool("keep_masks", masks=[1]),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    result = Sam3Agent(FakeSegmenter(dict(SEGMENTS)), chat).run(image, QUERY)
    assert "keep_masks" not in chat.main_calls[0][0].joined_text
    assert 'There is no tool named "keep_masks"' in chat.main_calls[2][-1].joined_text
    assert len(result.detections) == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arguments=st.dictionaries(st.sampled_from(["masks", "mask", "numbers", ""]), JSON))
def test_any_keep_masks_arguments_are_kept_or_corrected(
    arguments: dict[str, Any], image: np.ndarray
) -> None:
    """Whatever the model passes, the session goes on: valid numbers are kept, anything else
    is one corrective message, and the kept set holds only masks of the latest image."""
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="dog"),
            tool("keep_masks", **arguments),
            tool("select_masks_and_return", final_answer_masks=[]),
            tool("report_no_mask"),
        ]
    )
    config = AgentConfig(tool_set="extended")
    result = Sam3Agent(FakeSegmenter(dict(SEGMENTS)), chat, config).run(image, QUERY)
    numbers = arguments.get("masks")
    valid = (
        set(arguments) == {"masks"}
        and isinstance(numbers, list)
        and 0 < len(numbers) <= 64
        and all(type(n) is int and 1 <= n <= 2 for n in numbers)
    )
    # A float such as 1.0 is taken as the number it equals (pydantic's lax integers).
    lax = (
        set(arguments) == {"masks"}
        and isinstance(numbers, list)
        and 0 < len(numbers) <= 64
        and all(
            not isinstance(n, bool) and isinstance(n, int | float) and n in (1, 2) for n in numbers
        )
    )
    if valid or lax:
        assert result.status == "masks"
        assert len(result.detections) == len(set(numbers))  # type: ignore[arg-type]
    else:
        # Nothing was kept: the empty selection is refused, and the model gives up.
        assert result.status == "no_mask"
        assert "at least one mask number" in chat.main_calls[3][-1].joined_text


def test_kept_masks_are_drawn_apart_on_every_render(image: np.ndarray) -> None:
    renderer = Renderer(image)
    plain = renderer.numbered(DOGS)
    with_kept = renderer.numbered(DOGS, MAN[[0]])
    inside = MAN.masks[0]
    # The kept mask is tinted toward white where no numbered mask covers it.
    assert with_kept[inside].astype(int).mean() > plain[inside].astype(int).mean()
    assert np.array_equal(plain[DOGS.masks[0]], with_kept[DOGS.masks[0]])
    assert KEPT_COLOR == (255, 255, 255)


def test_the_trace_and_inspect_show_the_kept_set(tmp_path: Path, image: np.ndarray) -> None:
    out = tmp_path / "run"
    run(AgentConfig(tool_set="extended"), image, output_dir=out)
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    kept = [r.get("kept") for r in records if r["kind"] == "main"]
    assert kept[0] is None and kept[1] == [{"label": "K1", "from": "man"}]
    assert [k["from"] for k in kept[-1]] == ["man", "dog", "dog"]
    view = load_run(out)
    lines = [summary.kept_line(r) for r in view.rounds]
    assert lines[0] is None
    assert lines[-1] == 'kept for the answer: K1 (from "man"), K2 (from "dog"), K3 (from "dog")'
    # The renders of later searches show the kept masks (their own image files).
    assert (out / "images" / "r003_masks.jpg").is_file()


def test_a_paper_session_writes_no_kept_set(tmp_path: Path, image: np.ndarray) -> None:
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="man"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    out = tmp_path / "run"
    Sam3Agent(FakeSegmenter(dict(SEGMENTS)), chat).run(image, QUERY, output_dir=out)
    session = json.loads((out / "session.json").read_text())
    assert "kept" not in json.dumps(session["state"])
    assert all("kept" not in json.loads(line) for line in (out / "trace.jsonl").open())


@pytest.mark.parametrize("at", range(1, len(SCRIPT) + 1))
def test_a_killed_session_with_kept_masks_resumes_to_the_same_result(
    tmp_path: Path, image: np.ndarray, at: int
) -> None:
    config = AgentConfig(tool_set="extended", context_policy="summary")
    expected, _ = run(config, image, output_dir=tmp_path / "ref")
    scripted, out = ScriptedChatModel(replies=list(SCRIPT)), tmp_path / "run"
    segmenter = FakeSegmenter(dict(SEGMENTS))
    with pytest.raises(Killed):
        Sam3Agent(segmenter, KilledAt(scripted, at), config).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]
    resumed = Sam3Agent(segmenter, scripted, config).run(image, QUERY, output_dir=out, resume=True)
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert scripted.replies == [] and trace_records(out) == trace_records(tmp_path / "ref")
    assert [m.tolist() for m in resumed.detections.masks] == [m.tolist() for m in expected_union()]
