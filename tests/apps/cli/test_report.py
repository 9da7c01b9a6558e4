"""``sam3-agent report``: what it says about a directory it cannot report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.apps.cli.main import app
from tests.support.eval_fixtures import ABLATION_MODEL, write_ablation_runs
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


def test_two_runs_print_the_samples_that_differ(tmp_path: Path) -> None:
    paper, extended = write_ablation_runs(tmp_path)
    shown = runner.invoke(app, ["report", str(paper), str(extended), "--out", str(tmp_path / "r")])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    model = f"{ABLATION_MODEL} + SAM 3 agent"
    start = lines.index(
        f"{model} (extended tools) against {model}: reasonseg: "
        "3 of 4 samples differ in IoU (by more than 0.001, or in failing)"
    )
    assert lines[start + 1 : start + 4] == [
        "  val/c#0: 0.000 -> 1.000 (+1.000)",
        "  val/a#0: 0.200 -> 1.000 (+0.800)",
        "  val/d#0: 0.000 (failed) -> 0.000 (+0.000)",
    ]
    assert "## Per-sample differences" in (tmp_path / "r" / "report.md").read_text()
