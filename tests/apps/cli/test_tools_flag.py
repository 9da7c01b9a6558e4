"""``--tools``: one flag on every agent command, refused clearly where it cannot apply."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("command", ["run", "track", "eval", "batch", "demo"])
def test_every_agent_command_takes_the_tool_set(command: str) -> None:
    assert "--tools" in runner.invoke(app, [command, "--help"]).output


def test_an_unknown_tool_set_is_one_line_before_any_model_loads() -> None:
    result = runner.invoke(app, ["run", "photo.jpg", "the dog", "--tools", "all"])
    assert result.exit_code == 2
    assert "--tools must be 'paper' or 'extended', got 'all'" in result.output


def test_track_refuses_the_extended_tools() -> None:
    result = runner.invoke(app, ["track", "clip.mp4", "the dog", "--tools", "extended"])
    assert result.exit_code == 2 and "video sessions have the paper's tools" in result.output
