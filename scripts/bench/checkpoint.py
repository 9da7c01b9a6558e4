"""What resumability costs per round: the commit and the call journal, next to a round's work.

For 1 / 20 / 50 synthetic masks at 1008x1008 and 3000x2000, prints medians of:

* "round work": the agent's own work in a segment round (post-processing, the numbered
  render and its JPEG encode), as ``python -m scripts.bench round`` measures it;
* "commit": :meth:`Checkpoint.commit` after a 12-round history with those masks new and
  current (JSON of the steps, the masks as COCO RLE, an fsync of the trace, an atomic
  replace); a round that leaves the masks as they were reuses their encoding;
* "journal SAM 3": journaling one SAM 3 result of that many masks (RLE + an fsync'd append);
* "journal MLLM": journaling one MLLM answer (an fsync'd append),

and the ratio of commit + journal SAM 3 to the round's work. The MLLM and SAM 3 calls
themselves (seconds) are not included: the ratio is an upper bound of the overhead.

Usage: python -m scripts.bench checkpoint [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint, Journal
from sam3_agent.agent.checkpoint.journal import response_to_json
from sam3_agent.agent.checkpoint.state import detections_to_json
from sam3_agent.agent.image import ImageScene
from sam3_agent.agent.prompts import default_prompt_set
from sam3_agent.agent.session import Session
from sam3_agent.agent.steps import ActionStep, Observation
from sam3_agent.media.render import Renderer
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.masks import postprocess
from sam3_agent.values.messages import ChatResponse
from scripts.bench.round import blob_detections, photo
from tests.support.fakes import ScriptedChatModel

SIZES = [(1008, 1008), (2000, 3000)]
MASK_COUNTS = [1, 20, 50]


def median_s(
    work: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None
) -> float:
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(image: RGBImage, raw: Detections, repeats: int) -> tuple[float, ...]:
    """Medians (s) of the round's work, a commit, journaling SAM 3's result and an answer."""
    renderer = Renderer(image, 1024)

    def round_work() -> None:
        kept = postprocess(raw, score_threshold=0.5, overlap_threshold=0.3)
        EncodedImage.encode(renderer.numbered(kept if len(kept) else raw), "r")

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        config = AgentConfig()
        fingerprint = Fingerprint.of(query="q", image=image, config=config, model="m")
        checkpoint = Checkpoint.start(out, fingerprint, system_prompt="s", checker_prompt="c")
        session = Session(
            config=config,
            scene=ImageScene(image, config),  # no segmenter: nothing is segmented
            chat_model=ScriptedChatModel(),  # never called: the session is only committed
            query="q",
            prompts=default_prompt_set(),
            checker_prompt="c",
            trace=checkpoint.trace,
        )
        observation = Observation("x" * 300, session.task_image)
        steps = [
            ActionStep(i + 1, "<tool>{}</tool>" * 20, "segment", observation) for i in range(12)
        ]
        session.round = 12
        journal = Journal(out / "calls.jsonl", 13, [])
        answer = response_to_json(ChatResponse("<think>" + "y" * 800 + "</think><tool>{}</tool>"))

        def new_masks() -> None:  # as after a segment round: masks not encoded yet
            session.current = Detections(raw.masks, raw.boxes, raw.scores)

        def commit() -> None:
            checkpoint.commit(session.snapshot(steps, 0))

        return (
            median_s(round_work, repeats),
            median_s(commit, repeats, setup=new_masks),
            median_s(lambda: journal.append("segment", "k", [detections_to_json(raw)]), repeats),
            median_s(lambda: journal.append("chat", "k", answer), repeats),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'size':>10} {'masks':>5} {'round work':>11} {'commit':>9} {'journal SAM 3':>14} "
          f"{'journal MLLM':>13} {'overhead':>9}")  # fmt: skip
    for height, width in SIZES:
        image = photo(height, width)
        for count in MASK_COUNTS:
            raw = blob_detections(height, width, count, seed=count)
            work, commit, segment, answer = measure(image, raw, args.repeats)
            ratio = (commit + segment) / work
            print(
                f"{width}x{height:<5} {count:>5} {work * 1e3:>9.1f}ms {commit * 1e3:>7.1f}ms "
                f"{segment * 1e3:>12.1f}ms {answer * 1e3:>11.1f}ms {ratio:>8.2f}x"
            )


if __name__ == "__main__":
    main()
