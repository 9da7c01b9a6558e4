"""Tiny evaluation datasets in the exact published formats, and fakes that answer them.

Each dataset is written by :func:`write_reasonseg`, :func:`write_refcoco` or
:func:`write_grefcoco`. :data:`PLAN` says, for every query, which masks SAM 3 finds for it
(the query itself is the phrase) and how the scripted MLLM answers, so that the agent and
the SAM 3-only baseline make the same predictions and the metrics below are known exactly.

Hand-computed expectations (ignore pixels excluded, IoU 1.0 when both are empty):

ReasonSeg val (40x60 images):
  a#0 "the left block"      target 20x20 with a 5x5 ignore hole; pred 10x10 at the corner
                            covering the hole: I = 100-25 = 75, U = 400-25 = 375, IoU 0.2
  b#0 "what could someone sit on"  exact 20x20: I = U = 400, IoU 1.0          (long)
  c#0 "the missing thing"   10x10 target, agent reports no mask: I 0, U 100   (short)
  d#0 "the query that breaks the endpoint"  MLLM/SAM 3 error -> failed: U 100 (long)
  gIoU = 1.2/4 = 0.3, cIoU = 475/975; short: gIoU 0.1, cIoU 75/475; long: 0.5, 400/500
RefCOCO val:
  "man in the middle" exact 400 -> 1.0; "center person" 100 of 400 -> 0.25;
  "top left cat" 10x10 shifted by 5,5 -> 25/175.  gIoU (1.25 + 1/7)/3, cIoU 525/975
gRefCOCO val:
  "both small squares" two anns, both found -> 1.0; "the purple elephant" no target,
  no mask -> 1.0; "the flying saucer" no target, 100 px mask -> 0.0 (U += 100);
  "the lonely square" target missed -> 0.0.  gIoU 0.5, cIoU 200/400, N-acc 0.5, T-acc 0.5
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

from sam3_agent.runs.evaluation.datasets import load_samples
from sam3_agent.runs.evaluation.handler import Prediction, evaluate_samples
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.store import ResultStore
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ChatModelError, SegmenterError
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatMessage
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, square_mask, tool

Answer = Literal["select", "no_mask", "error"]


@dataclass(frozen=True)
class Planned:
    """What happens for one query: SAM 3's masks for it, and the MLLM's answer."""

    size: tuple[int, int]
    masks: tuple[tuple[int, int, int], ...]  # squares as (y0, x0, side)
    answer: Answer = "select"

    def detections(self) -> Detections:
        h, w = self.size
        if not self.masks:
            return Detections.empty(h, w)
        stack = np.stack([square_mask(h, w, y, x, s) for y, x, s in self.masks])
        return Detections.from_masks(stack, scores=[0.9 - 0.05 * i for i in range(len(stack))])


RS = (40, 60)
IMG1 = (40, 60)
IMG2 = (30, 50)

PLAN: dict[str, Planned] = {
    # ReasonSeg
    "the left block": Planned(RS, ((0, 0, 10),)),
    "block on the left side": Planned(RS, ((0, 0, 20),)),
    "what could someone sit on": Planned(RS, ((10, 10, 20),)),
    "the missing thing": Planned(RS, (), "no_mask"),
    "the query that breaks the endpoint": Planned(RS, (), "error"),
    # RefCOCO
    "man in the middle": Planned(IMG1, ((10, 10, 20),)),
    "center person": Planned(IMG1, ((10, 10, 10),)),
    "top left cat": Planned(IMG2, ((5, 5, 10),)),
    "bottom right dog": Planned(IMG2, ((20, 40, 10),)),
    # gRefCOCO
    "both small squares": Planned(IMG1, ((0, 0, 10), (20, 40, 10))),
    "the purple elephant": Planned(IMG1, (), "no_mask"),
    "the flying saucer": Planned(IMG2, ((0, 0, 10),)),
    "the lonely square": Planned(IMG2, (), "no_mask"),
}

EXPECTED: dict[str, dict[str, Any]] = {
    "reasonseg": {
        "count": 4,
        "gIoU": 0.3,
        "cIoU": 475 / 975,
        "short": (0.1, 75 / 475),
        "long": (0.5, 400 / 500),
        "failed": 1,
        "pr": {0.5: 0.25, 0.6: 0.25, 0.7: 0.25, 0.8: 0.25, 0.9: 0.25},
    },
    "refcoco": {"count": 3, "gIoU": (1.25 + 1 / 7) / 3, "cIoU": 525 / 975, "failed": 0},
    "grefcoco": {
        "count": 4,
        "gIoU": 0.5,
        "cIoU": 0.5,
        "N-acc": 0.5,
        "T-acc": 0.5,
        "failed": 0,
    },
}


# --------------------------------------------------------------------------- writers


def _save_image(path: Path, size: tuple[int, int], shade: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = size
    pixels = np.zeros((h, w, 3), dtype=np.uint8)
    pixels[..., 0] = shade
    pixels[..., 1] = (np.arange(w)[None, :] * 4) % 256
    pixels[..., 2] = 255 - shade
    Image.fromarray(pixels).save(path, quality=95)


def _rect(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
    """A labelme polygon whose filled pixels are x0..x1, y0..y1 inclusive."""
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def _shape(label: str, points: list[list[int]]) -> dict[str, object]:
    return {
        "label": label,
        "points": points,
        "group_id": None,
        "shape_type": "polygon",
        "flags": {},
    }


def write_reasonseg(root: Path, split: str = "val", copies: int = 1) -> Path:
    """ReasonSeg in the LISA layout: ``root/<split>/<name>.jpg`` + ``<name>.json``.

    ``copies`` > 1 repeats the four images (``a``, ``a_1``, ...) with distinct pixels, for
    benchmarks that need more samples with the same known answers.
    """
    folder = root / split
    folder.mkdir(parents=True, exist_ok=True)
    docs = {
        "a": (
            ["the left block", "block on the left side"],
            False,
            # The small ignore polygon is listed first: only descending-area filling keeps it.
            [
                _shape("ignore", _rect(5, 5, 9, 9)),
                _shape("target", _rect(0, 0, 19, 19)),
                _shape("flag", _rect(40, 0, 59, 39)),
            ],
        ),
        "b": (["what could someone sit on"], True, [_shape("target", _rect(10, 10, 29, 29))]),
        "c": (["the missing thing"], False, [_shape("target", _rect(30, 0, 39, 9))]),
        "d": (
            ["the query that breaks the endpoint"],
            True,
            [_shape("target", _rect(0, 30, 9, 39))],
        ),
    }
    for copy in range(copies):
        for shade, (base, (texts, is_sentence, shapes)) in enumerate(docs.items()):
            name = base if copy == 0 else f"{base}_{copy}"
            _save_image(folder / f"{name}.jpg", RS, (40 * shade + 20 + 7 * copy) % 256)
            doc = {
                "text": texts,
                "is_sentence": is_sentence,
                "shapes": shapes,
                "imagePath": f"{name}.jpg",
                "imageHeight": RS[0],
                "imageWidth": RS[1],
            }
            (folder / f"{name}.json").write_text(json.dumps(doc))
    return root


def _coco_images(root: Path) -> list[dict[str, object]]:
    images = []
    for image_id, size in ((1, IMG1), (2, IMG2)):
        name = f"COCO_train2014_{image_id:012d}.jpg"
        _save_image(root / "images/mscoco/images/train2014" / name, size, 60 * image_id)
        images.append({"id": image_id, "file_name": name, "height": size[0], "width": size[1]})
    return images


def _compressed_rle(mask: np.ndarray) -> dict[str, object]:
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode()}


def _uncompressed_rle(mask: np.ndarray) -> dict[str, object]:
    flat = mask.astype(np.uint8).flatten(order="F")
    counts, current, run = [], 0, 0
    for v in flat:
        if v == current:
            run += 1
        else:
            counts.append(run)
            current, run = int(v), 1
    counts.append(run)
    return {"size": list(mask.shape), "counts": counts}


def _instances(images: list[dict[str, object]], annotations: list[dict[str, object]]) -> str:
    return json.dumps(
        {
            "info": {},
            "images": images,
            "annotations": annotations,
            "categories": [{"id": 1, "name": "thing", "supercategory": "thing"}],
        }
    )


def _ann(ann_id: int, image_id: int, segmentation: object) -> dict[str, object]:
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": 1,
        "segmentation": segmentation,
        "iscrowd": 0,
        "area": 0.0,
        "bbox": [0, 0, 0, 0],
    }


def _sentences(texts: Sequence[tuple[int, str]]) -> list[dict[str, object]]:
    return [{"sent_id": i, "sent": t, "raw": t, "tokens": t.split()} for i, t in texts]


def write_refcoco(root: Path, dataset: str = "refcoco") -> Path:
    """``root/<dataset>/refs(unc).p`` + ``instances.json`` + COCO-named train2014 images."""
    images = _coco_images(root)
    folder = root / dataset
    folder.mkdir(parents=True, exist_ok=True)
    annotations = [
        _ann(101, 1, [[10, 10, 30, 10, 30, 30, 10, 30]]),  # polygon: rows/cols 10..29
        _ann(102, 2, _compressed_rle(square_mask(*IMG2, 0, 0, 10))),
        _ann(103, 2, _uncompressed_rle(square_mask(*IMG2, 20, 40, 10))),
    ]
    (folder / "instances.json").write_text(_instances(images, annotations))
    refs = [
        {
            "ref_id": 1,
            "ann_id": 101,
            "image_id": 1,
            "split": "val",
            "category_id": 1,
            "file_name": "COCO_train2014_000000000001_101.jpg",
            "sent_ids": [11, 12],
            "sentences": _sentences([(11, "man in the middle"), (12, "center person")]),
        },
        {
            "ref_id": 2,
            "ann_id": 102,
            "image_id": 2,
            "split": "val",
            "category_id": 1,
            "file_name": "COCO_train2014_000000000002_102.jpg",
            "sent_ids": [21],
            "sentences": _sentences([(21, "top left cat")]),
        },
        {
            "ref_id": 3,
            "ann_id": 103,
            "image_id": 2,
            "split": "testA",
            "category_id": 1,
            "file_name": "COCO_train2014_000000000002_103.jpg",
            "sent_ids": [31],
            "sentences": _sentences([(31, "bottom right dog")]),
        },
    ]
    name = "refs(umd).p" if dataset == "refcocog" else "refs(unc).p"
    with (folder / name).open("wb") as f:
        pickle.dump(refs, f)
    return root


def write_grefcoco(root: Path) -> Path:
    """``root/grefcoco/grefs(unc).json`` + ``instances.json`` + train2014 images."""
    images = _coco_images(root)
    folder = root / "grefcoco"
    folder.mkdir(parents=True, exist_ok=True)
    annotations = [
        _ann(201, 1, [[0, 0, 10, 0, 10, 10, 0, 10]]),
        _ann(202, 1, [[40, 20, 50, 20, 50, 30, 40, 30]]),
        _ann(203, 2, [[10, 10, 20, 10, 20, 20, 10, 20]]),
    ]
    (folder / "instances.json").write_text(_instances(images, annotations))

    def ref(ref_id: int, image_id: int, ann_ids: list[int], text: str) -> dict[str, object]:
        return {
            "ref_id": ref_id,
            "image_id": image_id,
            "ann_id": ann_ids,
            "no_target": ann_ids == [-1],
            "category_id": [1] if ann_ids != [-1] else [],
            "split": "val",
            "sent_ids": [ref_id * 10],
            "sentences": _sentences([(ref_id * 10, text)]),
        }

    grefs = [
        ref(1, 1, [201, 202], "both small squares"),
        ref(2, 1, [-1], "the purple elephant"),
        ref(3, 2, [-1], "the flying saucer"),
        ref(4, 2, [203], "the lonely square"),
    ]
    (folder / "grefs(unc).json").write_text(json.dumps(grefs))
    return root


# --------------------------------------------------------------------------- fakes


def _query_in(messages: Sequence[ChatMessage]) -> str:
    text = "\n".join(m.joined_text for m in messages if m.role == "user")
    found = [q for q in PLAN if q in text]
    if not found:
        raise AssertionError(f"no planned query in the conversation: {text[:200]!r}")
    return max(found, key=len)


def scripted_reply(messages: Sequence[ChatMessage]) -> str:
    """The MLLM's turn for any planned query (see :data:`PLAN`)."""
    query = _query_in(messages[:2])
    plan = PLAN[query]
    if plan.answer == "error":
        raise ChatModelError("scripted endpoint failure")
    if not any(m.role == "assistant" for m in messages):
        if plan.answer == "no_mask":
            return tool("report_no_mask")
        return tool("segment_phrase", text_prompt=query)
    return tool("select_masks_and_return", final_answer_masks=list(range(1, len(plan.masks) + 1)))


def _failing(image: RGBImage) -> Detections:
    raise SegmenterError("scripted SAM 3 failure")


def make_segmenter() -> FakeSegmenter:
    """SAM 3 answering every planned query used as a phrase."""
    seg = FakeSegmenter()
    for query, plan in PLAN.items():
        seg.results[query] = _failing if plan.answer == "error" else plan.detections()
    return seg


def make_chat_model(delay_s: float = 0.0, replies: int = 500) -> ScriptedChatModel:
    """An MLLM answering every planned query (``replies`` main calls in all)."""
    return ScriptedChatModel(replies=[scripted_reply] * replies, delay_s=delay_s)


class UnionPredictor:
    """Segments the raw query and predicts the union of every mask (no post-processing)."""

    def __init__(self, segmenter: SharedEmbeddings, delay_s: float = 0.0) -> None:
        self.segmenter = segmenter
        self.delay_s = delay_s
        self.queries: list[str] = []

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        self.queries.append(query)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        detections = self.segmenter.embed(image).segment([query], 0.5)[0]
        if len(detections) == 0:
            return Prediction(outcome={"status": "no_mask"})
        return Prediction(outcome={"status": "masks"}, mask=detections.union())


class ReplannedPredictor(UnionPredictor):
    """:class:`UnionPredictor`, except for the queries in ``plan``: their planned squares
    (none: no mask), or a SAM 3 failure for answer ``error``. A second run (another tool set,
    say) that differs from the first on known samples."""

    def __init__(self, segmenter: SharedEmbeddings, plan: dict[str, Planned]) -> None:
        super().__init__(segmenter)
        self.plan = plan

    async def predict(self, image: RGBImage, query: str, output_dir: Path) -> Prediction:
        planned = self.plan.get(query)
        if planned is None:
            return await super().predict(image, query, output_dir)
        if planned.answer == "error":
            raise SegmenterError("scripted SAM 3 failure")
        detections = planned.detections()
        if len(detections) == 0:
            return Prediction(outcome={"status": "no_mask"})
        return Prediction(outcome={"status": "masks"}, mask=detections.union())


ABLATION_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"

EXTENDED_PLAN = {
    "the left block": Planned(RS, ((0, 0, 20),)),  # the whole target: IoU 1.0 (+0.8)
    "the missing thing": Planned(RS, ((0, 30, 10),)),  # found exactly: 1.0 (+1.0)
    "the query that breaks the endpoint": Planned(RS, ()),  # no mask, no failure: 0.0 (0)
}
"""How the ``extended`` run of :func:`write_ablation_runs` answers otherwise (the ``paper``
run scores a 0.2, b 1.0, c 0.0 and d failed, as :data:`EXPECTED` says)."""


def write_ablation_runs(root: Path, copies: int = 1) -> tuple[Path, Path]:
    """Two ReasonSeg val runs (``copies`` as :func:`write_reasonseg`) in ``root/paper`` and
    ``root/extended`` whose settings differ only in the tool set, the second answering
    :data:`EXTENDED_PLAN`'s queries otherwise."""
    data = write_reasonseg(root / "rs", copies=copies)
    runs = []
    for tool_set, plan in (("paper", {}), ("extended", EXTENDED_PLAN)):
        config = {"dataset": "reasonseg", "split": "val", "mode": "agent",
                  "model": ABLATION_MODEL, "sam3": "fake-sam3", "shard": None,
                  "all_texts": False, "agent": {"score_threshold": 0.5, "tool_set": tool_set}}  # fmt: skip
        shared = SharedEmbeddings(make_segmenter())
        predictor = ReplannedPredictor(shared, plan)
        samples = load_samples("reasonseg", data, "val")
        with ResultStore.create_or_resume(root / tool_set, config, SampleResult.from_json) as s:
            asyncio.run(evaluate_samples(samples, s, predictor, shared=shared))
        runs.append(root / tool_set)
    return runs[0], runs[1]
