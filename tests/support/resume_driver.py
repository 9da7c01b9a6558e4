"""``sam3-agent run`` with fake backends whose every answer is logged, for kill-and-resume tests.

``python -m tests.support.resume_driver --log FILE [--delay S] run IMAGE QUERY ...`` runs the real
command. The scripted MLLM waits ``S`` seconds per call, then appends a line to ``FILE``
(synced) for each answer it hands over: ``main <index>`` for the main conversation's
:data:`SCRIPT`, ``check <request digest>`` for a mask check. A new process continues the
script after the last ``main`` line of the log, as one endpoint would, so a test can kill a
process with SIGKILL, resume in another, and count that no answer was handed over twice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec, request_key
from tests.support.fake_hub import use_fake_hub
from tests.support.fakes import (
    FakeSegmenter,
    ScriptedChatModel,
    is_check_request,
    square_mask,
    tool,
)

SCRIPT = [
    tool("segment_phrase", text_prompt="dog"),
    tool("segment_phrase", text_prompt="cat"),
    tool("examine_each_mask"),
    tool("segment_phrase", text_prompt="Cat"),  # a duplicate: corrected, no SAM 3 call
    tool("select_masks_and_return", final_answer_masks=[1, 2]),
]
KEPT_SCRIPT = [  # with --tools extended: an answer spanning two searches
    tool("segment_phrase", text_prompt="cat"),
    tool("keep_masks", masks=[1, 3]),
    tool("segment_phrase", text_prompt="dog"),  # finds nothing; the kept set stays
    tool("select_masks_and_return", final_answer_masks=[]),
]
SCRIPTS = {"paper": SCRIPT, "kept": KEPT_SCRIPT}
"""The scripts a driver may follow, by the ``SAM3_TEST_SCRIPT`` it runs with (``paper``)."""
Segmentation = Callable[[RGBImage], Detections]
VERDICTS = {2: "The mask is a cushion. <verdict>Reject</verdict>"}


def cats(image: RGBImage) -> Detections:
    h, w = image.shape[:2]
    masks = np.stack(
        [
            square_mask(h, w, 10, 10, 40),
            square_mask(h, w, 100, 150, 50),
            square_mask(h, w, 180, 20, 30),
        ]
    )
    return Detections.from_masks(masks, [0.9, 0.8, 0.7])


class LoggedChatModel(ScriptedChatModel):
    """A :class:`ScriptedChatModel` that logs every answer it hands over to ``log``."""

    def __init__(self, log: Path, delay_s: float) -> None:
        done = log.read_text().split().count("main") if log.is_file() else 0
        script = SCRIPTS[os.environ.get("SAM3_TEST_SCRIPT", "paper")]
        super().__init__(replies=list(script[done:]), verdicts=dict(VERDICTS), delay_s=delay_s)
        self.log = log
        self.handed_over = done

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        response = await super().complete(messages, tools=tools)
        if is_check_request(messages):
            line = f"check {request_key(messages, tools)}"
        else:
            line, self.handed_over = f"main {self.handed_over}", self.handed_over + 1
        with open(self.log, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        return response


def logged(log: Path, phrase: str, found: Callable[[RGBImage], Detections]) -> Segmentation:
    """SAM 3's answer to ``phrase``, logged as ``segment <phrase>`` when handed over."""

    def segment(image: RGBImage) -> Detections:
        detections = found(image)
        with open(log, "a") as f:
            f.write(f"segment {phrase}\n")
            f.flush()
            os.fsync(f.fileno())
        return detections

    return segment


def nothing(image: RGBImage) -> Detections:
    return Detections.empty(*image.shape[:2])


def make_segmenter(log: Path) -> FakeSegmenter:
    return FakeSegmenter({"cat": logged(log, "cat", cats), "dog": logged(log, "dog", nothing)})


def use_logged_backends(log: Path, delay_s: float) -> None:
    segmenter = make_segmenter(log)
    BackendSpec.build_segmenter = lambda self: segmenter  # type: ignore[method-assign,assignment,return-value]
    BackendSpec.build_chat_model = lambda self: LoggedChatModel(log, delay_s)  # type: ignore[method-assign,assignment,return-value]
    use_fake_hub()  # nothing asks the real hub whether a model exists


if __name__ == "__main__":
    args = sys.argv[1:]
    log, delay = Path(args[1]), 0.0
    args = args[2:]
    if args[:1] == ["--delay"]:
        delay, args = float(args[1]), args[2:]
    use_logged_backends(log, delay)
    app(args)
