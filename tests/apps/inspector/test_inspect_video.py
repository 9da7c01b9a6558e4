"""`inspect` on a video session: the clip, the frames tracked and the tracks selected."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.apps.cli.main import app
from sam3_agent.values.config import FrameSelection
from tests.support.clips import LEFT_AND_RIGHT, write_frames
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool


def test_inspect_names_the_video_and_the_tracks(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 9)
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="square"),
            tool("examine_each_mask"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ],
        verdicts={2: "<verdict>Reject</verdict>"},
    )
    agent = Sam3VideoAgent(
        FakeVideoSegmenter({"square": LEFT_AND_RIGHT}), chat, selection=FrameSelection(stride=2)
    )
    out = tmp_path / "out"
    agent.run(folder, "the square that moves left", output_dir=out)
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", str(out)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "5 frame(s) tracked" in shown.output
    assert "1: frames 0-8" in shown.output  # source frame numbers, not positions
    assert "examine_each_mask" in shown.output
    html = tmp_path / "page.html"
    made = runner.invoke(app, ["inspect", "--html", str(html), str(out)])
    assert made.exit_code == 0, made.output
    assert "r001_masks" in html.read_text()
