"""Benchmark: SAM 3 with the backbone cached per image vs recomputed for every phrase.

Full-size SAM 3 architecture (``Sam3Model(Sam3Config())``, ~840M parameters, random
weights: the timing does not depend on the weights' values) on a real photo at the default
1008-px processor size. Three phrases are answered

* ``cached``: through :class:`Sam3Segmenter`, one ``segment`` call per phrase as the agent
  makes them; the backbone runs once, on the first ``embed``;
* ``recompute``: ``processor(images=..., text=phrase)`` + ``model(**inputs)`` for each phrase,
  backbone included every time, as the original agent does;

side by side in one process, and the ratio of wall times is printed (about 0.4 expected on
a CPU: one backbone plus three light decoder passes against three full forwards). Not part
of CI: it needs ~5 GB of RAM and a few minutes on two cores.

    python -m scripts.bench sam3 [--threads N] [--no-warmup]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.values.detections import Detections
from tests.support.tiny_sam3 import tiny_tokenizer

PHRASES = ["a person", "the helmet", "a flag"]


def load_photo() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


def recompute(
    model: torch.nn.Module, processor: object, image: np.ndarray, phrase: str
) -> Detections:
    """One phrase the original way: image and text through the full forward."""
    with torch.inference_mode():
        inputs = processor(images=image, text=[phrase], return_tensors="pt")  # type: ignore[operator]
        outputs = model(**inputs)
        (result,) = processor.post_process_instance_segmentation(  # type: ignore[attr-defined]
            outputs, threshold=0.0, mask_threshold=0.5, target_sizes=[image.shape[:2]]
        )
    # Sam3Segmenter drops masks that are empty at any resolution; so does this reference.
    lit = result["masks"].flatten(1).any(dim=1)
    return Detections(
        masks=result["masks"][lit].bool().numpy(),
        boxes=result["boxes"][lit].float().numpy(),
        scores=result["scores"][lit].float().numpy(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up forward")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import Sam3Config, Sam3ImageProcessor, Sam3Model, Sam3Processor

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = Sam3Model(Sam3Config()).eval()
    processor = Sam3Processor(image_processor=Sam3ImageProcessor(), tokenizer=tiny_tokenizer())
    n_params = sum(p.numel() for p in model.parameters())
    image = load_photo()
    print(
        f"SAM 3 full size, random weights: {n_params / 1e6:.0f}M parameters, built in "
        f"{time.perf_counter() - t0:.1f} s; photo {image.shape[1]}x{image.shape[0]} "
        f"(processor size {processor.target_size}); torch threads {args.threads}"
    )

    if not args.no_warmup:
        t0 = time.perf_counter()
        recompute(model, processor, image[::-1].copy(), "warm up")
        print(f"warm-up forward: {time.perf_counter() - t0:.1f} s")

    # The cache starts empty: the cached figure includes its one backbone run. The two ways
    # alternate phrase by phrase, so load from other processes falls on both alike.
    segmenter = Sam3Segmenter(model, processor, device="cpu", cache_size=4)
    t0 = time.perf_counter()
    embedding = segmenter.embed(image)
    t_cached = t_embed = time.perf_counter() - t0
    t_recompute = 0.0
    cached: list[Detections] = []
    recomputed: list[Detections] = []
    for phrase in PHRASES:
        t0 = time.perf_counter()
        recomputed.append(recompute(model, processor, image, phrase))
        t_recompute += time.perf_counter() - t0
        t0 = time.perf_counter()
        cached.append(embedding.segment([phrase], 0.0)[0])
        t_cached += time.perf_counter() - t0

    t0 = time.perf_counter()
    batched = embedding.segment(PHRASES, 0.0)
    t_batched = time.perf_counter() - t0

    n = len(PHRASES)
    print(f"cached backbone:    {t_cached:7.1f} s for {n} phrases (backbone {t_embed:.1f} s)")
    print(f"recompute backbone: {t_recompute:7.1f} s for {n} phrases")
    print(f"ratio cached/recompute: {t_cached / t_recompute:.2f}")
    print(f"(extra) {n} phrases in one forward on the cached features: {t_batched:.1f} s")
    for name, others in (("recompute", recomputed), ("one batch", batched)):
        score_diff = max(
            float(np.abs(a.scores - b.scores).max()) for a, b in zip(cached, others, strict=True)
        )
        flipped = max(
            float((a.masks != b.masks).mean()) for a, b in zip(cached, others, strict=True)
        )
        print(
            f"cached vs {name}: max score difference {score_diff:.2e}, "
            f"mask pixels differing {100 * flipped:.3f}% (random weights: logits near 0)"
        )


if __name__ == "__main__":
    main()
