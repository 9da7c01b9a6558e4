"""An ended session's result, read back without any model, is the one a resume with the
models gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.agent.checkpoint import check_resumable
from sam3_agent.agent.ended import finish_ended
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import ResumeError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel
from tests.support.resume import QUERY, Killed, KilledAt, comparable
from tests.support.resume_driver import SCRIPT, VERDICTS, cats


def agent(config: AgentConfig, chat: object = None) -> Sam3Agent:
    chat = chat or ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))
    return Sam3Agent(FakeSegmenter({"cat": cats}), chat, config)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_rounds", [100, 2])  # ended by an answer, or by its rounds
def test_an_ended_session_reads_back_as_a_resume_with_the_models_gives(
    tmp_path: Path, image: np.ndarray, max_rounds: int
) -> None:
    config = AgentConfig(max_rounds=max_rounds)
    first = agent(config).run(image, QUERY, output_dir=tmp_path, exports=["png"])
    assert check_resumable(tmp_path, query=QUERY, image=image, config=config).ended
    (tmp_path / "result.json").unlink()
    read_back = finish_ended(tmp_path, image, QUERY, config=config, exports=["png"])
    written = json.loads((tmp_path / "result.json").read_text())
    with_models = agent(config, ScriptedChatModel()).run(
        image, QUERY, output_dir=tmp_path, resume=True, exports=["png"]
    )
    assert comparable(read_back.to_json()) == comparable(with_models.to_json())
    assert comparable(read_back.to_json()) == comparable(first.to_json())
    again = json.loads((tmp_path / "result.json").read_text())
    assert comparable(written) == comparable(again)
    assert (tmp_path / "masks").is_dir() == (first.status == "masks")


def test_a_session_with_calls_left_is_not_finished_without_the_models(
    tmp_path: Path, image: np.ndarray
) -> None:
    chat = ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))
    with pytest.raises(Killed):
        agent(AgentConfig(), KilledAt(chat, 3)).run(image, QUERY, output_dir=tmp_path)
    assert not check_resumable(tmp_path, query=QUERY, image=image, config=AgentConfig()).ended
    with pytest.raises(ResumeError, match="has not ended"):
        finish_ended(tmp_path, image, QUERY, config=AgentConfig())
