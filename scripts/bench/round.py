"""Time the agent's own work per round, everything but the two models.

For 1 / 5 / 20 / 50 synthetic blob masks on a real photo at 1008x1008 and 3000x2000, prints
medians of: post-processing; overlap removal alone next to a naïve full-array reference
(same run, with the speed ratio and a check that both keep the same masks); the numbered
render plus its JPEG encode; and the check renders (single + zoom per mask) plus encodes.

"segment round" = postprocess + numbered render + encode; "examine round" = the check
renders + encodes of every mask, then the survivors (two in three) selected, rendered
numbered and encoded, as the agent does. Budget: each under 0.3 s at 3000x2000 with 20
masks. Renders are timed on all N masks, as if every one survived post-processing (an upper
bound: "kept" says how many do). The segment round's figure includes preparing the
display-size masks; the examine round reuses them, as in a session (the masks it checks are
the ones the segment round rendered).

Last, one whole session (segment, examine, select) at 3000x2000 with 20 masks and an output
directory, with a probe task measuring how long the event loop was kept from running: the
longest stall is what a batch evaluation's other sessions would wait (goal: under 50 ms).

Usage: python -m scripts.bench round [--quick] [--repeats N] [--budget-only]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from sam3_agent.agent.context.tokens import qwen_image_tokens
from sam3_agent.agent.image import check_requests
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.media.render import Renderer
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.images import EncodedImage, RGBImage, downscale
from sam3_agent.values.masks import postprocess, remove_overlaps
from tests.support.fakes import FakeSegmenter, ScriptedChatModel

SIZES: list[tuple[int, int]] = [(1008, 1008), (2000, 3000)]  # (height, width)
MASK_COUNTS = [1, 5, 20, 50]
BUDGET_S = 0.3
STALL_GOAL_S = 0.05
SCORE_THRESHOLD = 0.5
OVERLAP_THRESHOLD = 0.3


def photo(height: int, width: int) -> RGBImage:
    """scikit-image's astronaut photo resized to ``(height, width)``; a gradient without it."""
    try:
        from skimage import data
    except ImportError:
        yy, xx = np.mgrid[:height, :width]
        grad = np.stack([xx * 255 // width, yy * 255 // height, (xx + yy) % 256], axis=2)
        return grad.astype(np.uint8)
    image = data.astronaut()
    return np.ascontiguousarray(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA))


def blob_detections(height: int, width: int, count: int, seed: int) -> Detections:
    """``count`` filled ellipses of varied size; about a third are shifted, grown or shrunk
    copies of earlier ones (so overlap removal has work to do). Scores uniform in [0.3, 1]."""
    rng = np.random.default_rng(seed)
    masks = np.zeros((count, height, width), dtype=bool)
    side = min(height, width)
    for i in range(count):
        if i > 0 and rng.random() < 0.35:
            src = masks[int(rng.integers(0, i))].view(np.uint8)
            dy, dx = (int(v) for v in rng.integers(-side // 40, side // 40 + 1, size=2))
            shifted = np.roll(src, (dy, dx), axis=(0, 1))
            k = int(rng.integers(3, max(4, side // 60)))
            op = cv2.dilate if rng.random() < 0.5 else cv2.erode
            masks[i] = np.asarray(op(shifted, np.ones((k, k), np.uint8))) > 0
        else:
            canvas = np.zeros((height, width), dtype=np.uint8)
            center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
            axes = (
                int(rng.integers(side // 100 + 2, side // 6)),
                int(rng.integers(side // 100 + 2, side // 6)),
            )
            angle = float(rng.uniform(0, 180))
            cv2.ellipse(canvas, center, axes, angle, 0, 360, 1, thickness=-1)
            masks[i] = canvas > 0
    scores = rng.uniform(0.3, 1.0, size=count).astype(np.float32)
    return Detections.from_masks(masks, scores)


def naive_overlap_removal(masks: np.ndarray, order: np.ndarray, threshold: float) -> list[int]:
    """Greedy IoM removal on full arrays, as written without regard to cost."""
    kept: list[int] = []
    for j, i in enumerate(order.tolist()):
        duplicate = False
        for k in kept:
            other = int(order[k])
            inter = int(np.logical_and(masks[i], masks[other]).sum())
            if inter / min(int(masks[i].sum()), int(masks[other].sum())) > threshold:
                duplicate = True
                break
        if not duplicate:
            kept.append(j)
    return kept


def median_s(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: imports, OpenCV thread pool, page faults
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fresh(detections: Detections) -> Detections:
    """The same arrays under a new object, so no render cache entry applies."""
    return Detections(masks=detections.masks, boxes=detections.boxes, scores=detections.scores)


@dataclass
class Row:
    size: str
    masks: int
    kept: int
    postprocess: float
    overlap: float
    naive: float
    same: bool
    numbered: float
    checks: float

    @property
    def segment_round(self) -> float:
        return self.postprocess + self.numbered

    @property
    def examine_round(self) -> float:
        return self.checks


def bench(height: int, width: int, count: int, repeats: int, naive_repeats: int) -> Row:
    image = photo(height, width)
    raw = blob_detections(height, width, count, seed=count)
    renderer = Renderer(image)

    # Overlap removal alone, on the candidates postprocess would hand it.
    candidates = np.flatnonzero(raw.scores >= SCORE_THRESHOLD)
    order = candidates[np.argsort(-raw.scores[candidates], kind="stable")]
    boxes = tight_boxes(raw.masks[order]).astype(np.int64)
    fast_kept = remove_overlaps(raw.masks, order, boxes, OVERLAP_THRESHOLD).tolist()
    naive_kept = naive_overlap_removal(raw.masks, order, OVERLAP_THRESHOLD)
    overlap = median_s(lambda: remove_overlaps(raw.masks, order, boxes, OVERLAP_THRESHOLD), repeats)
    naive = median_s(
        lambda: naive_overlap_removal(raw.masks, order, OVERLAP_THRESHOLD), naive_repeats
    )

    post = median_s(lambda: postprocess(raw), repeats)
    kept = postprocess(raw)

    def numbered() -> None:
        EncodedImage.encode(renderer.numbered(fresh(raw)), "numbered")

    prepared = fresh(raw)
    renderer.numbered(prepared)  # the segment round's render: the check renders reuse it

    def checks() -> None:
        check_requests(renderer, prepared, prefix="bench", quality=90)
        # Every third mask rejected: an uneven selection, which copies the survivors' masks.
        survivors = prepared[[i for i in range(len(prepared)) if i % 3 != 1]]
        EncodedImage.encode(renderer.numbered(survivors), "survivors")

    return Row(
        size=f"{width}x{height}",
        masks=count,
        kept=len(kept),
        postprocess=post,
        overlap=overlap,
        naive=naive,
        same=fast_kept == naive_kept,
        numbered=median_s(numbered, repeats),
        checks=median_s(checks, repeats),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (2, naïve 1)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per figure")
    parser.add_argument(
        "--budget-only", action="store_true", help="only 3000x2000 with 20 masks, and the stall"
    )
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    naive_repeats = 1 if args.quick else min(3, repeats)

    print(
        f"cpus={os.cpu_count()} opencv_threads={cv2.getNumThreads()} numpy={np.__version__} "
        f"opencv={cv2.__version__} repeats={repeats} (naive {naive_repeats}); medians in ms"
    )
    header = (
        f"{'image':>9} {'masks':>5} {'kept':>4} | {'postproc':>8} {'overlap':>8} "
        f"{'naive':>9} {'ratio':>7} {'same':>4} | {'numb+enc':>8} {'checks+enc':>10} | "
        f"{'segment':>7} {'examine':>7}"
    )
    print(header)
    print("-" * len(header))
    budget_rows = []
    sizes = [(2000, 3000)] if args.budget_only else SIZES
    counts = [20] if args.budget_only else MASK_COUNTS
    for height, width in sizes:
        for count in counts:
            row = bench(height, width, count, repeats, naive_repeats)
            ratio = f"{row.naive / row.overlap:6.0f}x" if row.naive > 1e-4 else "      -"
            print(
                f"{row.size:>9} {row.masks:>5} {row.kept:>4} | {row.postprocess * 1e3:8.2f} "
                f"{row.overlap * 1e3:8.2f} {row.naive * 1e3:9.1f} {ratio} "
                f"{'yes' if row.same else 'NO':>4} | {row.numbered * 1e3:8.1f} "
                f"{row.checks * 1e3:10.1f} | {row.segment_round * 1e3:7.1f} "
                f"{row.examine_round * 1e3:7.1f}"
            )
            if (height, width) == (2000, 3000) and count == 20:
                budget_rows.append(row)
    for row in budget_rows:
        worst = max(row.segment_round, row.examine_round)
        verdict = "within" if worst < BUDGET_S else "OVER"
        print(
            f"agent's own work per round at {row.size}, {row.masks} masks: "
            f"segment {row.segment_round * 1e3:.0f} ms, examine {row.examine_round * 1e3:.0f} ms "
            f"({verdict} the {BUDGET_S * 1e3:.0f} ms budget)"
        )
    print_session_stall(repeats=1 if args.quick else 3)
    print_image_tokens()


def scripted_chat() -> ScriptedChatModel:
    """Replies segment / examine / select and accepts every mask; answers at once."""
    return ScriptedChatModel(
        replies=[
            '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "blob"}}</tool>',
            '<tool>{"name": "examine_each_mask", "parameters": {}}</tool>',
            '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}'
            "</tool>",
        ],
        default_verdict="<verdict>Accept</verdict>",
    )


async def _session_with_probe(
    agent: Sam3Agent | None, image: RGBImage, out: Path, idle_s: float = 0.0
) -> float:
    """Run one session while a probe task measures the event loop's longest stall (s).

    ``agent=None`` runs no session but only sleeps ``idle_s``: the stall an idle loop sees
    on this machine, printed beside the session's (another process's load shows there too).
    """
    loop = asyncio.get_running_loop()
    worst = 0.0
    done = False

    async def probe() -> None:
        nonlocal worst
        while not done:
            before = loop.time()
            await asyncio.sleep(0.001)
            worst = max(worst, loop.time() - before - 0.001)

    task = asyncio.ensure_future(probe())
    await asyncio.sleep(0)
    try:
        if agent is None:
            await asyncio.sleep(idle_s)
        else:
            await agent.arun(image, "the blobs", output_dir=out)
    finally:
        done = True
        await task
    return worst


def print_session_stall(repeats: int) -> None:
    height, width, count = 2000, 3000, 20
    image = photo(height, width)
    detections = blob_detections(height, width, count, seed=count)
    segmenter = FakeSegmenter(default=lambda image: fresh(detections))
    stalls, idle = [], []

    def session() -> float:
        agent = Sam3Agent(segmenter, scripted_chat(), AgentConfig())
        with tempfile.TemporaryDirectory() as tmp:
            return asyncio.run(_session_with_probe(agent, image, Path(tmp) / "run"))

    session()  # warm-up: first template compiles, imports, the thread pool
    for _ in range(repeats):
        started = time.perf_counter()
        stalls.append(session())
        took = time.perf_counter() - started
        idle.append(asyncio.run(_session_with_probe(None, image, Path(), idle_s=took)))
    worst = statistics.median(stalls)
    verdict = "within" if worst < STALL_GOAL_S else "OVER"
    print(
        f"longest event-loop stall of a whole session at {width}x{height}, {count} masks, "
        f"output dir set: {worst * 1e3:.1f} ms (median of {repeats} sessions; {verdict} the "
        f"{STALL_GOAL_S * 1e3:.0f} ms goal); an idle loop over the same time: "
        f"{statistics.median(idle) * 1e3:.1f} ms"
    )


def print_image_tokens() -> None:
    """What downscaling to the default 1,024 max side saves per image sent."""
    for height, width in ((1008, 1008), (2000, 3000), (3024, 4032)):
        small = downscale(np.zeros((height, width, 3), dtype=np.uint8), 1024).shape
        print(
            f"image tokens per image at {width}x{height}: "
            f"{qwen_image_tokens(height, width)} as is, "
            f"{qwen_image_tokens(small[0], small[1])} at {small[1]}x{small[0]} (sent)"
        )


if __name__ == "__main__":
    main()
