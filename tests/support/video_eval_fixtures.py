"""Video evaluation with fakes: tiny datasets, and models that answer them as planned.

The datasets are those of :mod:`tests.support.video_datasets` (object ``k`` is an 8-pixel
square moving right 4 pixels a frame), plus :func:`write_revos_videos`, a ReVOS with several
videos for shards. :data:`PLAN` says, for every query, which squares SAM 3 tracks for the
phrase the scripted MLLM tries and what the MLLM answers, so every J and F is known:

Ref-DAVIS17 valid (video ``d1``, target object 1, four expressions):
  0 "first anno1"  tracks object 1, selected               J 1    F 1
  1 "full anno1"   tracks object 2, selected (wrong)       J 0    F 0 (contours 4 px apart)
  2 "first anno2"  no mask                                 J 0    F 0
  3 "full anno2"   tracks objects 1 and 2, both selected   J 1/2  F 2/3 (half the predicted
                   contour lies on the target's, all of the target's is matched)
  mean J 3/8, mean F 5/12, J&F 19/48; annotator-1 J 1/2 F 1/2, annotator-2 J 1/4 F 1/3
ReVOS valid (video ``r1``):
  0 "the top square" (referring)     object 1, selected     J 1  F 1
  1 "what moves below?" (reasoning)  no mask                J 0  F 0
  2 "the purple cow" (type 2, no target)  no mask           J 1  F 1
  referring 1, reasoning 0, overall (their mean) 1/2; type-2 1
ReasonVOS valid (video ``q1``, masks on frames 0 and 2 only):
  "Which square is on top?"  object 1, selected: J 1, F 1 on the 2 annotated frames
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sam3_agent.values.errors import ChatModelError
from sam3_agent.values.messages import ChatMessage
from tests.support.clips import Square
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool
from tests.support.video_datasets import (
    FRAMES,
    _meta,
    object_mask,
    rle,
    write_frames,
    write_json,
)

Answer = Literal["select", "no_mask", "error"]


def object_square(obj: int) -> Square:
    """Object ``obj`` of the synthetic datasets as a clip square (the same pixels as
    :func:`tests.support.video_datasets.object_mask`)."""
    return Square((200, 40 * obj, 40), (2, 4 + 12 * (obj - 1)), (4, 0), side=8)


@dataclass(frozen=True)
class Planned:
    """The phrase the MLLM tries, the objects SAM 3 tracks for it, and the answer."""

    phrase: str
    objects: tuple[int, ...] = ()
    answer: Answer = "select"


PLAN: dict[str, Planned] = {
    # Ref-DAVIS17
    "first anno1": Planned("top square", (1,)),
    "full anno1": Planned("lower square", (2,)),
    "first anno2": Planned("nothing", (), "no_mask"),
    "full anno2": Planned("square", (1, 2)),
    # ReVOS
    "the top square": Planned("top square", (1,)),
    "what moves below?": Planned("nothing", (), "no_mask"),
    "the purple cow": Planned("purple cow", (), "no_mask"),
    "the query that breaks the endpoint": Planned("nothing", (), "error"),
    # ReasonVOS
    "Which square is on top?": Planned("top square", (1,)),
}

DAVIS = {"J": 3 / 8, "F": 5 / 12, "annotator-1": (1 / 2, 1 / 2), "annotator-2": (1 / 4, 1 / 3)}
REVOS = {"referring": 1.0, "reasoning": 0.0, "overall": 0.5, "type-2": 1.0}


def _query_in(messages: Sequence[ChatMessage]) -> str:
    text = "\n".join(m.joined_text for m in messages if m.role == "user")
    found = [q for q in PLAN if f'"{q}"' in text]
    if not found:
        raise AssertionError(f"no planned query in the conversation: {text[:300]!r}")
    return max(found, key=len)


def scripted_reply(messages: Sequence[ChatMessage]) -> str:
    """The MLLM's turn for any planned query: try its phrase, then select every track (or
    report no mask, or fail as an endpoint would)."""
    plan = PLAN[_query_in(messages[:2])]
    if plan.answer == "error":
        raise ChatModelError("scripted endpoint failure")
    if not any(m.role == "assistant" for m in messages):
        if plan.answer == "no_mask":
            return tool("report_no_mask")
        return tool("segment_phrase", text_prompt=plan.phrase)
    return tool("select_masks_and_return", final_answer_masks=list(range(1, len(plan.objects) + 1)))


def make_video_segmenter() -> FakeVideoSegmenter:
    """SAM 3's video model tracking the planned squares for every planned phrase."""
    squares = {
        plan.phrase: tuple(object_square(o) for o in plan.objects)
        for plan in PLAN.values()
        if plan.objects
    }
    return FakeVideoSegmenter(squares)


def make_chat_model(replies: int = 200, delay_s: float = 0.0) -> ScriptedChatModel:
    """An MLLM answering every planned query (``replies`` main calls in all, each after
    ``delay_s`` seconds)."""
    return ScriptedChatModel(replies=[scripted_reply] * replies, delay_s=delay_s)


@dataclass(frozen=True)
class FakeVideoBackends:
    """A picklable :class:`~sam3_agent.runs.jobs.models.ModelSource` building the fakes
    above wherever the work runs (a Ray worker imports this module)."""

    sam3: str = "fake-sam3-video"
    sam3_url: str | None = None
    llm: str | None = None
    llm_model: str | None = "scripted"
    built: list[str] = field(default_factory=list, compare=False)

    def generation_identity(self) -> dict[str, Any]:
        return {}

    def require_model_name(self, engine: str) -> str | None:
        return "scripted"

    def build_segmenter(self) -> Any:
        raise AssertionError("a video evaluation builds no image segmenter")

    def build_video_segmenter(self) -> FakeVideoSegmenter:
        self.built.append("video segmenter")
        return make_video_segmenter()

    def build_chat_model(self) -> ScriptedChatModel:
        self.built.append("chat model")
        return make_chat_model()


def write_revos_videos(parent: Path, videos: Sequence[str] = ("r1", "r2", "r3", "r4")) -> Path:
    """``parent/ReVOS`` with ``videos``, each with the three expressions of
    :func:`tests.support.video_datasets.make_revos` (so every video scores the same)."""
    root = parent / "ReVOS"
    exps = {
        "0": {"exp": "the top square", "obj_id": [0], "anno_id": [1], "type_id": 0},
        "1": {"exp": "what moves below?", "obj_id": [1], "anno_id": [2], "type_id": 1},
        "2": {"exp": "the purple cow", "obj_id": [], "anno_id": [], "type_id": 2},
    }
    write_json(root / "meta_expressions_valid_.json", {"videos": {v: _meta(exps) for v in videos}})
    write_json(
        root / "mask_dict.json",
        {str(obj): [rle(object_mask(obj, f)) for f in range(FRAMES)] for obj in (1, 2)},
    )
    for v in videos:
        write_frames(root / "JPEGImages" / v)
    return parent


def stored(run: Path) -> list[dict[str, Any]]:
    """A run directory's records without what differs between equal runs (wall-clock)."""
    from sam3_agent.runs.jobs.store import reading

    rows = []
    with reading(run, dict) as store:  # type: ignore[type-var]
        for doc in store.results():
            doc = dict(doc)
            doc.pop("time_s")
            doc["extra"] = {k: v for k, v in doc["extra"].items() if k != "timings_s"}
            rows.append(doc)
    return rows


def metrics(run: Path) -> list[dict[str, Any]]:
    """Every method's metrics in a report's ``metrics.json``."""
    doc = json.loads((run / "metrics.json").read_text())
    return [m["metrics"] for m in doc["methods"]]
