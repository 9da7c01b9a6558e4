"""``sam3-agent report``: what it says about a directory it cannot report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.apps.cli.main import app
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool
from tests.support.resume_driver import cats

runner = CliRunner()


def test_a_single_runs_directory_is_refused_in_one_line_pointing_to_inspect(
    tmp_path: Path, image: np.ndarray
) -> None:
    out = tmp_path / "run"
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    Sam3Agent(FakeSegmenter({"cat": cats}), chat).run(image, "a cat", output_dir=out)
    shown = runner.invoke(app, ["report", str(out)])
    assert shown.exit_code == 2
    (line,) = shown.stderr.splitlines()
    assert "a single run's directory" in line
    assert line.endswith(f"sam3-agent inspect {out}")
    assert not (out / "metrics.json").exists()
