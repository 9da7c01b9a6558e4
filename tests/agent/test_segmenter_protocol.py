"""A segmenter written against the published Protocol alone runs whole sessions.

The third-party classes below implement exactly what ``sam3_agent.backends.base`` documents
as required (``Segmenter.embed``; ``ImageEmbedding.image_size`` and ``segment``) and inherit
from nothing of the project's: no ``used_phrase``, which is optional.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.base import ImageEmbedding, ReadsPhrases, Segmenter, phrase_as_read
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from tests.support.fakes import ScriptedChatModel, tool


class PlainEmbedding:
    def __init__(self, image: np.ndarray, found: Detections) -> None:
        self._size = (int(image.shape[0]), int(image.shape[1]))
        self._found = found
        self.asked: list[str] = []

    @property
    def image_size(self) -> tuple[int, int]:
        return self._size

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        self.asked.extend(phrases)
        return [self._found if p == "cat" else Detections.empty(*self._size) for p in phrases]


class PlainSegmenter:
    def __init__(self, found: Detections) -> None:
        self._found = found
        self.embeddings: list[PlainEmbedding] = []

    def embed(self, image: np.ndarray) -> PlainEmbedding:
        embedding = PlainEmbedding(image, self._found)
        self.embeddings.append(embedding)
        return embedding


REPLIES = [
    tool("segment_phrase", text_prompt="dog"),
    tool("segment_phrase", text_prompt="cat"),
    tool("examine_each_mask"),
    tool("select_masks_and_return", final_answer_masks=[1]),
]


def test_the_plain_classes_satisfy_the_protocol_without_the_optional_method(
    image: np.ndarray, three_cats: Detections
) -> None:
    embedding = PlainSegmenter(three_cats).embed(image)
    assert isinstance(PlainSegmenter(three_cats), Segmenter)
    assert isinstance(embedding, ImageEmbedding)
    assert not isinstance(embedding, ReadsPhrases)
    assert phrase_as_read(embedding, "a phrase of any length") == "a phrase of any length"


def test_a_whole_session_runs_on_a_plain_segmenter(
    image: np.ndarray, three_cats: Detections, tmp_path: Path
) -> None:
    segmenter = PlainSegmenter(three_cats)
    chat = ScriptedChatModel(replies=list(REPLIES))
    agent = Sam3Agent(segmenter, chat, AgentConfig())
    result = agent.run(image, "the cat", output_dir=tmp_path / "run")
    assert result.status == "masks" and len(result.detections) == 1
    assert result.phrases_tried == ["dog", "cat"]
    assert segmenter.embeddings[0].asked == ["dog", "cat"]
    # No phrase was reported cut: the default reads every phrase in full.
    texts = [json.loads(line)["outcome"]["text"] for line in _main_records(tmp_path / "run")]
    assert texts and not any("only its beginning was used" in t for t in texts)


def test_a_plain_segmenter_without_a_run_directory(
    image: np.ndarray, three_cats: Detections
) -> None:
    chat = ScriptedChatModel(replies=list(REPLIES))
    result = Sam3Agent(PlainSegmenter(three_cats), chat, AgentConfig()).run(image, "the cat")
    assert result.status == "masks"


def _main_records(run_dir: Path) -> list[str]:
    lines = (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if json.loads(line)["kind"] == "main"]
