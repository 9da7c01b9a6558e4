"""A resumed session renders with the prompt set it started with, even after it changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.agent import prompts
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import AgentConfig
from tests.support.fakes import FakeSegmenter, ScriptedChatModel
from tests.support.resume import QUERY, Killed, KilledAt, comparable, trace_records
from tests.support.resume_driver import SCRIPT, VERDICTS, cats


def test_a_changed_prompt_set_does_not_reach_a_resumed_session(
    tmp_path: Path, image: np.ndarray
) -> None:
    prompt_dir = tmp_path / "my-prompts"
    shutil.copytree(str(prompts.canonical_dir()), prompt_dir)
    config = AgentConfig(prompts_dir=prompt_dir)

    def chat() -> ScriptedChatModel:
        return ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))

    expected = Sam3Agent(FakeSegmenter({"cat": cats}), chat(), config).run(
        image, QUERY, output_dir=tmp_path / "ref"
    )
    scripted, segmenter, out = chat(), FakeSegmenter({"cat": cats}), tmp_path / "run"
    with pytest.raises(Killed):  # killed after round 2, before examine's first check
        Sam3Agent(segmenter, KilledAt(scripted, 4), config).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]

    feedback = prompt_dir / "feedback.j2"
    feedback.write_text(feedback.read_text().replace("one by one", "EDITED"))
    resumed = Sam3Agent(segmenter, scripted, config).run(image, QUERY, output_dir=out, resume=True)

    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert trace_records(out) == trace_records(tmp_path / "ref")
    assert "EDITED" not in (out / "trace.jsonl").read_text()
    assert json.loads((out / "result.json").read_text())["prompts"] == expected.to_json()["prompts"]
    # A new session in the same settings does use the edited set.
    fresh = Sam3Agent(FakeSegmenter({"cat": cats}), chat(), config)
    fresh.run(image, QUERY, output_dir=tmp_path / "fresh")
    assert "EDITED" in (tmp_path / "fresh" / "trace.jsonl").read_text()
