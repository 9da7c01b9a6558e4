"""The tool sets: ``paper`` (the default, unchanged) and ``extended`` (visual exemplars)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.prompts import default_prompt_set
from sam3_agent.agent.tools import EXTENDED_TOOLS, TOOLS, tool_specs, tried_name
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.errors import UserError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool
from tests.support.resume import QUERY, Killed, KilledAt, comparable, trace_records


def test_paper_is_the_default_and_absent_from_the_settings() -> None:
    assert AgentConfig().tool_set == "paper"
    assert "tool_set" not in AgentConfig().to_dict()
    assert AgentConfig(tool_set="extended").to_dict()["tool_set"] == "extended"
    with pytest.raises(UserError, match="`tool_set` must be 'paper' or 'extended', got 'all'"):
        AgentConfig(tool_set="all")  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", ["tags", "native"])
def test_only_the_extended_set_offers_exemplars(protocol: str) -> None:
    segmenter, chat = FakeSegmenter(), ScriptedChatModel(replies=[])
    paper = Sam3Agent(segmenter, chat, AgentConfig(tool_protocol=protocol))  # type: ignore[arg-type]
    extended = Sam3Agent(
        segmenter,
        chat,
        AgentConfig(tool_protocol=protocol, tool_set="extended"),  # type: ignore[arg-type]
    )
    assert "`like`" not in paper.system_prompt and "`like`" in extended.system_prompt
    assert paper.tools is TOOLS and extended.tools is EXTENDED_TOOLS
    schema = {s.name: s for s in tool_specs(EXTENDED_TOOLS)}["segment_phrase"].parameters
    assert {"like", "unlike"} <= set(schema["properties"])
    assert schema["required"] == ["text_prompt"]
    paper_schema = {s.name: s for s in tool_specs(TOOLS)}["segment_phrase"].parameters
    assert "like" not in paper_schema["properties"]


def test_a_phrase_is_tried_with_its_exemplars() -> None:
    assert tried_name("apple", None) == "apple"
    both = Exemplars(((1, 2, 3, 4), (5, 6, 7, 8)), (True, False))
    assert tried_name("apple", both) == "apple [like 1,2,3,4; unlike 5,6,7,8]"


@pytest.mark.parametrize("policy", CONTEXT_POLICIES)
def test_exemplars_reach_the_segmenter_as_the_masks_boxes(
    policy: str, image: np.ndarray, three_cats: Detections
) -> None:
    if policy == "attention":
        pytest.skip("attention needs the in-process transformers MLLM")
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("segment_phrase", text_prompt="cat", like=[1]),  # new exemplars: a new search
            tool("segment_phrase", text_prompt="cat", like=[3], unlike=[2]),
            tool("segment_phrase", text_prompt="cat", like=[3], unlike=[2]),  # refused: tried
            tool("segment_phrase", text_prompt="cat", unlike=[9]),  # refused: no mask 9
            tool("select_masks_and_return", final_answer_masks=[1, 3]),
        ]
    )
    segmenter = FakeSegmenter({"cat": three_cats})
    config = AgentConfig(tool_set="extended", context_policy=policy)
    result = Sam3Agent(segmenter, chat, config).run(image, "the cats")
    assert result.status == "masks" and len(result.detections) == 2
    assert segmenter.phrases == ["cat", "cat", "cat"]
    boxes = [tuple(int(v) for v in b) for b in three_cats.mask_boxes]
    assert segmenter.exemplars == [
        None,
        Exemplars((boxes[0],), (True,)),
        Exemplars((boxes[2], boxes[1]), (True, False)),
    ]
    replies = [call[-1].joined_text for call in chat.main_calls[1:]]
    assert "already used" in replies[3] and "Mask number 9 does not exist" in replies[4]
    assert f"cat [like {','.join(map(str, boxes[2]))}; unlike" in replies[3]


def test_paper_refuses_exemplars(image: np.ndarray, three_cats: Detections) -> None:
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("segment_phrase", text_prompt="cat", like=[1]),
            tool("report_no_mask"),
        ]
    )
    Sam3Agent(FakeSegmenter({"cat": three_cats}), chat).run(image, "the cats")
    assert "unexpected parameter 'like'" in chat.main_calls[2][-1].joined_text


def test_only_the_extended_set_reads_its_templates() -> None:
    paper, extended = default_prompt_set(), default_prompt_set(tool_set="extended")
    assert "tool_rules.j2" not in paper.sources and "tool_rules.j2" in extended.sources
    assert paper.version != extended.version and extended.name == "builtin/extended"


def test_video_offers_kept_tracks_but_not_exemplars() -> None:
    from sam3_agent.agent.video.agent import Sam3VideoAgent

    config = AgentConfig(tool_set="extended")
    agent = Sam3VideoAgent(object(), ScriptedChatModel(replies=[]), config)  # type: ignore[arg-type]
    assert "keep_masks" in agent.tools and "`like`" not in agent.system_prompt
    assert agent.tools["segment_phrase"].params is TOOLS["segment_phrase"].params
    assert agent.prompts.name == "builtin/video/extended"


EXEMPLAR_SCRIPT = [
    tool("segment_phrase", text_prompt="cat"),
    tool("segment_phrase", text_prompt="cat", like=[1], unlike=[2]),
    tool("segment_phrase", text_prompt="cat", like=[1], unlike=[2]),  # refused: tried
    tool("select_masks_and_return", final_answer_masks=[1, 3]),
]


@pytest.mark.parametrize("at", range(1, len(EXEMPLAR_SCRIPT) + 1))
def test_a_killed_session_with_exemplars_resumes_to_the_same_result(
    tmp_path: Path, image: np.ndarray, three_cats: Detections, at: int
) -> None:
    config = AgentConfig(tool_set="extended")

    def chat() -> ScriptedChatModel:
        return ScriptedChatModel(replies=list(EXEMPLAR_SCRIPT))

    expected = Sam3Agent(FakeSegmenter({"cat": three_cats}), chat(), config).run(
        image, QUERY, output_dir=tmp_path / "ref"
    )
    scripted, segmenter, out = chat(), FakeSegmenter({"cat": three_cats}), tmp_path / "run"
    with pytest.raises(Killed):
        Sam3Agent(segmenter, KilledAt(scripted, at), config).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]
    resumed = Sam3Agent(segmenter, scripted, config).run(image, QUERY, output_dir=out, resume=True)
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert scripted.replies == [] and trace_records(out) == trace_records(tmp_path / "ref")
    assert resumed.to_json()["phrases_tried"] == [
        "cat",
        "cat [like 10,10,50,50; unlike 150,100,200,150]",
    ]
    # SAM 3 was asked each search once over both runs (a journaled answer is not asked again).
    assert segmenter.phrases == ["cat", "cat"]
    assert [e is not None for e in segmenter.exemplars] == [False, True]


def test_a_run_records_its_tool_set_and_report_names_it() -> None:
    from sam3_agent.runs.evaluation.methods import method_label
    from sam3_agent.runs.jobs.models import agent_identity

    paper = agent_identity(AgentConfig(), leave_out=())
    extended = agent_identity(AgentConfig(tool_set="extended"), leave_out=())
    assert "tool_set" not in paper and extended["tool_set"] == "extended"
    assert extended["prompts"]["name"] == "builtin/extended" != paper["prompts"]["name"]
    assert method_label({"model": "m", "agent": paper}) == "m + SAM 3 agent"
    assert method_label({"model": "m", "agent": extended}) == "m + SAM 3 agent (extended tools)"
