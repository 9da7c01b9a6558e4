"""``--tools``: one flag on every agent command, refused clearly where it cannot apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec, ModelPlan
from tests.support.clips import LEFT_AND_RIGHT, write_mp4
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool

runner = CliRunner()


@pytest.mark.parametrize("command", ["run", "track", "eval", "batch", "demo"])
def test_every_agent_command_takes_the_tool_set(command: str) -> None:
    assert "--tools" in runner.invoke(app, [command, "--help"]).output


def test_an_unknown_tool_set_is_one_line_before_any_model_loads() -> None:
    result = runner.invoke(app, ["run", "photo.jpg", "the dog", "--tools", "all"])
    assert result.exit_code == 2
    assert "--tools must be 'paper' or 'extended', got 'all'" in result.output


def test_track_takes_the_extended_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``track --tools extended``: the video set (kept tracks), no longer refused."""
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="square"),
            tool("keep_masks", masks=[2]),
            tool("select_masks_and_return", final_answer_masks=[]),
        ]
    )
    monkeypatch.setattr(BackendSpec, "plan", lambda self, **kwargs: ModelPlan(self))
    segmenter = FakeVideoSegmenter({"square": LEFT_AND_RIGHT})
    monkeypatch.setattr(BackendSpec, "build_video_segmenter", lambda self: segmenter)
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: chat)
    clip, out = write_mp4(tmp_path / "clip.mp4", 4), tmp_path / "out"
    args = ["track", str(clip), "the right square", "--out", str(out), "--tools", "extended"]
    args += ["--sam3-url", "http://127.0.0.1:9", "--llm-url", "http://127.0.0.1:9/v1"]
    done = runner.invoke(app, [*args, "--llm-model", "m"])
    assert done.exit_code == 0, done.output
    doc = json.loads((out / "result.json").read_text())
    assert doc["status"] == "masks" and len(doc["tracks"]) == 1
    assert doc["prompts"]["name"] == "builtin/video/extended"
