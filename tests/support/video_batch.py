"""Batches that mix image and video requests: the input files and models that answer them.

:class:`MixedModels` is a picklable :class:`~sam3_agent.runs.jobs.models.ModelSource` (Ray
workers import it: the repository root is on their path) building the tests' fakes: the
image segmenter and MLLM of ``eval_fixtures`` and a :class:`FakeVideoSegmenter` over the
synthetic clips of ``clips``. The MLLM is stateless, a function of each conversation, so
sessions may run in any order and on any worker:

* a video query of :data:`VIDEO_PLAN` segments its phrase, then selects its tracks (or
  reports no mask);
* any other query is an image query of ``eval_fixtures.PLAN``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.messages import ChatMessage
from tests.support.clips import LEFT_AND_RIGHT, write_frames, write_mp4
from tests.support.eval_fixtures import make_segmenter, scripted_reply, write_reasonseg
from tests.support.fakes import FakeSegmenter, FakeVideoSegmenter, ScriptedChatModel, tool

RED, GREEN = LEFT_AND_RIGHT
SQUARES = {"square": (RED, GREEN), "red square": (RED,)}

VIDEO_PLAN: dict[str, tuple[str, list[int] | None]] = {
    "the square that moves left": ("red square", [1]),
    "both squares": ("square", [1, 2]),
    "the purple triangle": ("purple triangle", None),
}
"""Video query -> (the phrase segmented, the tracks selected; None: report no mask)."""

IMAGE_QUERIES = ("the left block", "the missing thing")
"""Image queries of ``eval_fixtures.PLAN`` (one selects a mask, one reports none)."""

CLIP_FRAMES = 8


def mixed_reply(messages: Sequence[ChatMessage]) -> str:
    """The MLLM's turn in any session of a mixed batch (see the module docstring)."""
    first = messages[1].joined_text
    video = next((q for q in VIDEO_PLAN if q in first), None)
    if video is None:
        return scripted_reply(messages)
    phrase, pick = VIDEO_PLAN[video]
    if not any(m.role == "assistant" for m in messages):
        return tool("segment_phrase", text_prompt=phrase)
    if pick is None:
        return tool("report_no_mask")
    return tool("select_masks_and_return", final_answer_masks=pick)


@dataclass(frozen=True)
class MixedModels:
    """Builds the fakes, and records what it built (``built``: this process only).

    ``video_error``: building the video segmenter raises it (a model that cannot load).
    """

    sam3: str = "fake-sam3"
    sam3_url: str | None = None
    llm: str | None = None
    llm_model: str | None = "scripted"
    video_error: str | None = None
    built: list[str] = field(default_factory=list, compare=False)

    def generation_identity(self) -> dict[str, Any]:
        return {}

    def require_model_name(self, engine: str) -> str | None:
        if self.llm_model is None and engine == "ray":
            raise UserError("`engine='ray'` loads the MLLM on the workers only: name it")
        return self.llm_model

    def build_segmenter(self) -> FakeSegmenter:
        self.built.append("sam3")
        return make_segmenter()

    def build_video_segmenter(self) -> FakeVideoSegmenter:
        self.built.append("video")
        if self.video_error is not None:
            raise SegmenterError(self.video_error)
        return FakeVideoSegmenter(SQUARES)

    def build_chat_model(self) -> ScriptedChatModel:
        self.built.append("mllm")
        return ScriptedChatModel(replies=[mixed_reply] * 500)


def write_mixed_jsonl(folder: Path) -> Path:
    """``requests.jsonl`` in ``folder``: 2 images x 2 queries, then videos: an MP4 with two
    queries (one selecting, one finding nothing), a frame folder every 2nd frame, and the MP4
    again with both squares over at most 4 frames. Relative paths."""
    root = write_reasonseg(folder / "rs")
    images = sorted((root / "val").glob("*.jpg"))[:2]
    (folder / "clips").mkdir(parents=True, exist_ok=True)
    write_mp4(folder / "clips" / "clip.mp4", CLIP_FRAMES)
    write_frames(folder / "clips" / "frames", CLIP_FRAMES)
    rows: list[dict[str, Any]] = [
        {"image": str(image.relative_to(folder)), "query": query}
        for image in images
        for query in IMAGE_QUERIES
    ]
    rows += [
        {"video": "clips/clip.mp4", "query": "the square that moves left"},
        {"video": "clips/clip.mp4", "query": "the purple triangle"},
        {"video": "clips/frames", "query": "the square that moves left", "stride": 2},
        {"video": "clips/clip.mp4", "query": "both squares", "max_frames": 4, "id": "both"},
    ]
    path = folder / "requests.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
