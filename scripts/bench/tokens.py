"""What a session sends the MLLM, in image and text tokens, and what the original would.

The trajectory of issue 9: one ``segment_phrase`` finding 20 masks, ``examine_each_mask``
(20 isolated checks, all accepted), ``select_masks_and_return``. It is run through the real
agent with a recording chat model, at 1008x1008, 3000x2000 and 4032x3024, and every request
is counted: images by Qwen2.5-VL's rule (28-pixel token cells) on the size actually sent,
text estimated at 4 UTF-8 bytes a token (the same estimate on both sides of each ratio). Both
rules are the agent's own (:mod:`sam3_agent.agent.context.tokens`), so these figures and a run's
``tokens_estimate`` count alike.

The original's figure is the same conversation with its image sizes: it sends the raw image,
the numbered render and each check's image with the mask drawn at full resolution, and a
close-up rendered by matplotlib at 640x480 at most (6.4x4.8 in at 100 dpi); image tokens by
the same rule. Goal (issue 9): at most 0.4x the original at 1008x1008.

First, the measurement behind the context-view size (``render.CONTEXT_MIN_MASK_SIDE``): for
each candidate threshold N, how much of a mask's shape survives being shown at that size (the
IoU of the mask downscaled so its box's shorter side is N pixels, and scaled back, with
itself), beside what the session then costs at 1008x1008 against the original.

Usage: python -m scripts.bench tokens
"""

from __future__ import annotations

import asyncio
import math
import statistics

import cv2
import numpy as np

from sam3_agent.agent.context.tokens import BYTES_PER_TOKEN, TokenCounter, qwen_image_tokens
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.media import render
from sam3_agent.media.drawing import resize_mask
from sam3_agent.media.render import CONTEXT_MIN_MASK_SIDE
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, is_check_request

SIZES = [(1008, 1008), (2000, 3000), (3024, 4032)]  # (height, width)
MASKS = 20
ORIGINAL_CLOSE_UP = (480, 640)  # (height, width): matplotlib's default figure at 100 dpi
GOAL = 0.4


ESTIMATE = TokenCounter()
"""The agent's offline estimate: text by :data:`BYTES_PER_TOKEN`, Qwen2.5-VL image cells."""


def text_tokens(text: str) -> int:
    return ESTIMATE.text(text)


def separate_masks(height: int, width: int, count: int, seed: int = 0) -> Detections:
    """``count`` disjoint ellipses on a grid, their sizes spread from 2 % to 18 % of the
    image's shorter side (small and large objects alike), scores in [0.55, 0.99]."""
    rng = np.random.default_rng(seed)
    cols = math.ceil(math.sqrt(count * width / height))
    rows = math.ceil(count / cols)
    cell_w, cell_h = width // cols, height // rows
    side = min(height, width)
    masks = np.zeros((count, height, width), dtype=bool)
    for i in range(count):
        r, c = divmod(i, cols)
        canvas = np.zeros((height, width), dtype=np.uint8)
        radius = int(side * rng.uniform(0.01, 0.09))
        radius = min(radius, cell_w // 2 - 2, cell_h // 2 - 2)
        center = (c * cell_w + cell_w // 2, r * cell_h + cell_h // 2)
        axes = (radius, max(2, int(radius * rng.uniform(0.5, 1.0))))
        cv2.ellipse(canvas, center, axes, float(rng.uniform(0, 180)), 0, 360, 1, thickness=-1)
        masks[i] = canvas > 0
    scores = np.sort(rng.uniform(0.55, 0.99, size=count))[::-1].astype(np.float32)
    return Detections.from_masks(masks, scores)


def trajectory_chat() -> ScriptedChatModel:
    """Plays the trajectory, accepting every mask; its transcript keeps every request."""
    return ScriptedChatModel(
        replies=[
            '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "blob"}}</tool>',
            '<tool>{"name": "examine_each_mask", "parameters": {}}</tool>',
            '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}'
            "</tool>",
        ],
        default_verdict="<think>It fits.</think><verdict>Accept</verdict>",
    )


def requests_of(chat: ScriptedChatModel) -> list[tuple[bool, list[ChatMessage], str]]:
    """Each request the chat model answered: (a mask check?, its messages, the reply)."""
    return [(is_check_request(m), m, response.text) for m, response in chat.transcript]


def original_size(image: EncodedImage, height: int, width: int) -> tuple[int, int]:
    """The size the original sends in place of ``image`` (ours, by its name)."""
    if image.name.endswith("_zoom.jpg"):
        return ORIGINAL_CLOSE_UP
    return height, width  # the raw image, the numbered render, a check's mask image


def count_tokens(
    requests: list[tuple[bool, list[ChatMessage], str]], height: int, width: int
) -> tuple[dict[str, int], dict[str, int]]:
    ours = {"main": 0, "checks": 0, "check_images": 0}
    original = {"main": 0, "checks": 0, "check_images": 0}
    for check, messages, reply in requests:
        zone = "checks" if check else "main"
        text = sum(
            text_tokens(p.text) for m in messages for p in m.parts if isinstance(p, TextPart)
        )
        text += text_tokens(reply)
        images = [p.image for m in messages for p in m.parts if isinstance(p, ImagePart)]
        ours_img = sum(qwen_image_tokens(i.height, i.width) for i in images)
        orig_img = sum(qwen_image_tokens(*original_size(i, height, width)) for i in images)
        ours[zone] += text + ours_img
        original[zone] += text + orig_img
        if check:
            ours["check_images"] += ours_img
            original["check_images"] += orig_img
    return ours, original


def image(height: int, width: int) -> RGBImage:
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def session_tokens(height: int, width: int) -> tuple[dict[str, int], dict[str, int]]:
    """Our and the original's tokens for the trajectory at ``height`` x ``width``."""
    chat = trajectory_chat()
    segmenter = FakeSegmenter(default=separate_masks(height, width, MASKS))
    agent = Sam3Agent(segmenter, chat, AgentConfig())
    result = asyncio.run(agent.arun(image(height, width), "the blobs"))
    requests = requests_of(chat)
    checks = sum(1 for check, _, _ in requests if check)
    if result.status != "masks" or checks != MASKS:
        raise SystemExit(f"unexpected trajectory: {result.status}, {checks} checks")
    return count_tokens(requests, height, width)


def ratio(ours: dict[str, int], original: dict[str, int]) -> float:
    return (ours["main"] + ours["checks"]) / (original["main"] + original["checks"])


def print_threshold_choice() -> None:
    detections = separate_masks(2000, 3000, 40, seed=5)
    print("context-view threshold N: how much of a mask's shape survives at N px (IoU of the")
    print("mask shown with its box's shorter side at N px and scaled back, with itself; 40")
    print("ellipses, median / 10th percentile), and the session's tokens at 1008x1008")
    for target in (8, 12, 16, 24, 32):
        ious = []
        for mask, (x0, y0, x1, y1) in zip(
            detections.masks, detections.mask_boxes.tolist(), strict=True
        ):
            crop = np.ascontiguousarray(mask[y0:y1, x0:x1]).view(np.uint8)
            f = target / min(x1 - x0, y1 - y0)
            small = resize_mask(crop, max(1, round((x1 - x0) * f)), max(1, round((y1 - y0) * f)))
            back = cv2.resize(small, (x1 - x0, y1 - y0), interpolation=cv2.INTER_NEAREST)
            ious.append(np.count_nonzero(back & crop) / np.count_nonzero(back | crop))
        # The threshold is a module constant that the renderer reads on every call.
        render.CONTEXT_MIN_MASK_SIDE = target
        try:
            cost = ratio(*session_tokens(1008, 1008))
        finally:
            render.CONTEXT_MIN_MASK_SIDE = CONTEXT_MIN_MASK_SIDE
        chosen = "  <- chosen" if target == CONTEXT_MIN_MASK_SIDE else ""
        print(
            f"  N={target:>2} px: IoU {statistics.median(ious):.3f} / "
            f"{float(np.percentile(ious, 10)):.3f}; session {cost:.2f}x the original's{chosen}"
        )


def main() -> None:
    print_threshold_choice()
    print()
    print(f"tokens of one session: segment {MASKS} masks, examine them, select (Qwen2.5-VL rule;")
    print(f"text at {BYTES_PER_TOKEN} bytes a token); the original sends full-size images")
    header = (
        f"{'image':>9} | {'main':>7} {'checks':>7} {'chk img':>7} {'session':>8} | "
        f"{'orig chk':>8} {'original':>8} | {'ratio':>5}"
    )
    print(header)
    print("-" * len(header))
    for height, width in SIZES:
        ours, original = session_tokens(height, width)
        total, orig_total = ours["main"] + ours["checks"], original["main"] + original["checks"]
        share = ratio(ours, original)
        goal = ""
        if (height, width) == (1008, 1008):
            goal = f" (goal <= {GOAL}x: {'met' if share <= GOAL else 'NOT met'})"
        print(
            f"{width}x{height:<4} | {ours['main']:>7} {ours['checks']:>7} "
            f"{ours['check_images']:>7} {total:>8} | {original['checks']:>8} {orig_total:>8} | "
            f"{share:4.2f}x{goal}"
        )


if __name__ == "__main__":
    main()
