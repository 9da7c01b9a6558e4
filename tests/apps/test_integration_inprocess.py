"""The in-process backends under the real agent: tiny random SAM 3 and Qwen2.5-VL models
saved to disk and loaded back through the same ``from_pretrained`` code as real weights.

Random weights say nothing useful, so these tests check the plumbing (shapes, files, one
backbone run per image, the session ending cleanly), never what the models "answer".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from sam3_agent import AgentConfig, Sam3Agent
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.values.messages import ChatMessage
from tests.support.fakes import ScriptedChatModel, tool


def decide(messages: Sequence[ChatMessage]) -> str:
    """Select mask 1 when the last phrase found masks, else try no more."""
    if "found no masks" in messages[-1].joined_text:
        return tool("report_no_mask")
    return tool("select_masks_and_return", final_answer_masks=[1])


def test_agent_with_the_real_sam3_backend(
    tiny_sam3_dir: Path, hf_offline: None, image: np.ndarray, tmp_path: Path
) -> None:
    segmenter = Sam3Segmenter.from_pretrained(str(tiny_sam3_dir), device="cpu")
    backbone_runs = []
    original = segmenter._model.get_vision_features

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        backbone_runs.append(1)
        return original(*args, **kwargs)

    segmenter._model.get_vision_features = counted  # type: ignore[method-assign]
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="a cat"),
            tool("segment_phrase", text_prompt="a dog"),
            decide,
        ]
    )
    agent = Sam3Agent(segmenter, chat, AgentConfig(score_threshold=0.0))
    result = agent.run(image, "the pet", output_dir=tmp_path)
    assert backbone_runs == [1]  # two phrases, one backbone run
    assert result.phrases_tried == ["a cat", "a dog"]
    assert result.status in ("masks", "no_mask")
    assert result.detections.masks.shape[1:] == image.shape[:2]
    if result.status == "masks":
        assert len(result.detections) == 1
    assert json.loads((tmp_path / "result.json").read_text())["status"] == result.status


def test_cli_run_with_both_in_process_backends(
    tiny_sam3_dir: Path, tiny_qwen_dir: Path, hf_offline: None, image: np.ndarray, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.jpg"
    Image.fromarray(image).save(photo)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "run", str(photo), "the cat", "--out", str(out),
            "--sam3", str(tiny_sam3_dir), "--llm", f"hf:{tiny_qwen_dir}",
            "--device", "cpu", "--max-rounds", "2", "--json",
        ],
    )  # fmt: skip
    # A random model writes no valid tool call: the session spends its rounds and fails
    # cleanly, with every file written.
    assert result.exit_code in (0, 3), result.output
    document = json.loads(result.stdout)
    assert document["model"] == str(tiny_qwen_dir)
    assert document["rounds"] <= 2
    assert document["usage"]["main"]["prompt_tokens"] > 0
    records = (out / "trace.jsonl").read_text().splitlines()
    assert len(records) >= document["rounds"]
    assert (out / "overlay.png").is_file()


@pytest.mark.parametrize("missing", ["does/not/exist", "/nonexistent/dir"])
def test_cli_missing_weights_is_one_clean_line(
    missing: str, hf_offline: None, image: np.ndarray, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.png"
    Image.fromarray(image).save(photo)
    result = CliRunner().invoke(app, ["run", str(photo), "cat", "--sam3", missing])
    assert result.exit_code == 1
    assert "WeightsUnavailableError" in result.stderr
    assert "Traceback" not in result.output
