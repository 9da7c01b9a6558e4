from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sam3_agent
from sam3_agent.backends import chat_models, segmenters
from sam3_agent.values.detections import Detections
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool


def test_segment_builds_the_backends_and_runs_one_session(
    monkeypatch: pytest.MonkeyPatch, image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    asked: dict[str, dict[str, object]] = {}

    def fake_segmenter(**kwargs: object) -> FakeSegmenter:
        asked["sam3"] = kwargs
        return FakeSegmenter({"cat": three_cats})

    def fake_chat(**kwargs: object) -> ScriptedChatModel:
        asked["llm"] = kwargs
        return ScriptedChatModel(
            replies=[
                tool("segment_phrase", text_prompt="cat"),
                tool("select_masks_and_return", final_answer_masks=[1]),
            ]
        )

    monkeypatch.setattr(sam3_agent.agent.api, "build_segmenter", fake_segmenter)
    monkeypatch.setattr(sam3_agent.agent.api, "build_chat_model", fake_chat)
    result = sam3_agent.segment(
        image, "a cat", output_dir=tmp_path, sam3_url="http://127.0.0.1:8100", llm_model="m",
        llm_url="http://127.0.0.1:9/v1",
    )  # fmt: skip
    assert result.status == "masks" and len(result.detections) == 1
    assert asked["sam3"]["url"] == "http://127.0.0.1:8100"
    assert (asked["llm"]["url"], asked["llm"]["model"]) == ("http://127.0.0.1:9/v1", "m")
    assert (tmp_path / "result.json").is_file()
    assert segmenters.build_segmenter is not fake_segmenter  # only the api module was patched
    assert chat_models.build_chat_model is not fake_chat
