"""Histories for context-policy tests: built from compact specs, images of chosen sizes.

Images are real (blank) JPEGs of the chosen size, encoded once per name and size.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sam3_agent.agent.context.types import History
from sam3_agent.agent.parsing import ToolCall
from sam3_agent.agent.steps import ActionStep, Observation, StepKind, TaskStep
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import NativeToolCall

SYSTEM = "You segment things. " * 40


@lru_cache(maxsize=512)
def image(name: str, side: int = 448) -> EncodedImage:
    return EncodedImage.encode(np.zeros((side, side, 3), dtype=np.uint8), name)


def task(query: str = "only the cats on the left", side: int = 448) -> TaskStep:
    return TaskStep(query, image("input", side))


@dataclass(frozen=True)
class Spec:
    """One round: its kind, whether it shows masks, and how long its texts are (words)."""

    kind: StepKind
    shows_masks: bool = False
    words: int = 20


def make_steps(specs: Sequence[Spec], side: int = 448, native: bool = False) -> list[ActionStep]:
    """``native``: rounds as ``--tool-protocol native`` records them (a structured call beside
    the visible text, answered by a tool message and, with an image, a user message)."""
    steps = []
    for i, spec in enumerate(specs, start=1):
        phrase = f"phrase {i}" if spec.kind == "segment" else None
        shown = image(f"r{i}", side) if spec.shows_masks and spec.kind != "correction" else None
        call = ToolCall("segment_phrase", {"text_prompt": phrase}) if phrase else None
        filler = " ".join(f"w{i}" for _ in range(spec.words))
        native_call = None
        if native:
            name = {"segment": "segment_phrase", "examine": "examine_each_mask"}.get(
                spec.kind, "unknown_tool"
            )
            arguments = json.dumps({"text_prompt": phrase} if phrase else {"detail": filler})
            native_call = NativeToolCall(name, arguments, id=f"call{i:05d}")
        steps.append(
            ActionStep(
                round=i,
                reply=f"<think>{filler}</think> reply {i}",
                kind=spec.kind,
                observation=Observation(
                    f"result {i}. {filler}", shown, f"[image {i} dropped]", f"[image {i} gone]"
                ),
                call=call,
                phrase=phrase,
                native_call=native_call,
            )
        )
    return steps


def history(
    specs: Sequence[Spec],
    side: int = 448,
    query: str = "only the cats on the left",
    native: bool = False,
) -> History:
    return History(SYSTEM, task(query, side), make_steps(specs, side, native))
