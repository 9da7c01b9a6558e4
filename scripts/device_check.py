"""Measurements for a machine with a CUDA GPU (run by ``scripts/device_check.sh``).

For the full-size SAM 3 architecture (``Sam3Model(Sam3Config())``, ~840M parameters, random
weights: speed and memory do not depend on the weights' values) in bfloat16, through the
project's own :class:`~sam3_agent.backends.sam3_local.Sam3Segmenter`, it prints:

* the model's construction time and resident GPU memory;
* the backbone per image: the forward alone, and ``embed`` (preprocessing + forward);
* the time per phrase on cached features, for 1 phrase and for 8 phrases in one forward;
* the peak GPU memory of each phase;

then the same for one agent round with the tiny random Qwen2.5-VL in process (the chat call
as the agent times it, its tokens, and the round's peak memory).

The model is built directly on the target device, so a GPU run spends seconds, not minutes,
on construction; the whole check takes well under the 5 minutes it is allowed. Nothing is
downloaded: the tokenizers are the tests' offline ones.

    python -m scripts.device_check                      # CUDA, full size (from the repo root)
    python -m scripts.device_check --device cpu --tiny  # the CPU smoke path
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sam3_agent.backends.sam3_local import Sam3Segmenter

PHRASES = [
    "a person",
    "the red car",
    "a dog",
    "window",
    "tree",
    "a bicycle",
    "the sky",
    "a bag",
]
PHOTO_SIZE = (1512, 2016)  # (H, W): a 3 MP phone photo; the processor resizes to 1008 px


class Meter:
    """Wall time with the device synchronised, and the device's peak memory per phase."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def phase(self) -> Iterator[dict[str, float]]:
        """Yields a dict that holds ``seconds`` and ``peak_gib`` once the block ends."""
        figures: dict[str, float] = {}
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        self.sync()
        started = time.perf_counter()
        try:
            yield figures
        finally:
            self.sync()
            figures["seconds"] = time.perf_counter() - started
            figures["peak_gib"] = self.peak_gib()

    def peak_gib(self) -> float:
        if not self.cuda:
            return float("nan")
        return torch.cuda.max_memory_allocated(self.device) / 2**30

    def resident_gib(self) -> float:
        if not self.cuda:
            return float("nan")
        return torch.cuda.memory_allocated(self.device) / 2**30

    def timed(self, fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
        """Median seconds of ``repeats`` calls, and the peak memory over all of them."""
        times = []
        peak = 0.0
        for _ in range(repeats):
            with self.phase() as figures:
                fn()
            times.append(figures["seconds"])
            peak = max(peak, figures["peak_gib"]) if self.cuda else peak
        return statistics.median(times), peak if self.cuda else float("nan")


def _gib(value: float) -> str:
    return "n/a (not CUDA)" if value != value else f"{value:.2f} GiB"


def photo(seed: int, size: tuple[int, int]) -> np.ndarray:
    """A deterministic ``(H, W, 3)`` uint8 image (content does not change the cost)."""
    return np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)


def build_sam3(device: torch.device, dtype: torch.dtype, tiny: bool) -> tuple[Any, Any, str]:
    """The model (on ``device``, in ``dtype``, eval mode), its processor, and a description."""
    from transformers import Sam3Config, Sam3ImageProcessor, Sam3Model, Sam3Processor

    from tests.support.tiny_sam3 import tiny_model_and_processor, tiny_tokenizer

    torch.manual_seed(0)
    if tiny:
        tiny_model, processor = tiny_model_and_processor()
        moved: Any = tiny_model.to(device=device, dtype=dtype)
        return moved.eval(), processor, "tiny SAM 3 (tests/support/tiny_sam3.py)"
    # Built on the device itself: no 840M-parameter random init on the CPU, no copy after.
    with torch.device(device):
        model: Any = Sam3Model(Sam3Config())
    model = model.to(dtype=dtype).eval()
    processor = Sam3Processor(image_processor=Sam3ImageProcessor(), tokenizer=tiny_tokenizer())
    return model, processor, "full-size SAM 3 architecture (Sam3Config()), random weights"


def check_sam3(meter: Meter, dtype: torch.dtype, tiny: bool, repeats: int) -> None:
    device = meter.device
    with meter.phase() as built:
        model, processor, what = build_sam3(device, dtype, tiny)
    params = sum(p.numel() for p in model.parameters())
    print(f"SAM 3: {what}, {params / 1e6:.2f}M parameters, {dtype} on {device}")
    print(
        f"  construction: {built['seconds']:.1f} s; resident {_gib(meter.resident_gib())}, "
        f"peak {_gib(built['peak_gib'])}"
    )
    # cache_size=0: every embed runs the backbone, which is what is being timed.
    segmenter = Sam3Segmenter(model, processor, cache_size=0)  # type: ignore[arg-type]
    size = (240, 320) if tiny else PHOTO_SIZE
    images = [photo(seed, size) for seed in range(repeats + 1)]

    with meter.phase() as warm:
        segmenter.embed(images[-1]).segment(PHRASES, 0.5)
    print(f"  warm-up (first embed + 8 phrases): {warm['seconds']:.2f} s")

    pixel_values = processor(images=images[0], return_tensors="pt")["pixel_values"].to(
        device, dtype=dtype
    )

    def backbone() -> None:
        with torch.inference_mode():
            model.get_vision_features(pixel_values=pixel_values)

    seconds, peak = meter.timed(backbone, repeats)
    side = tuple(pixel_values.shape[-2:])
    print(f"  backbone forward per image ({side[0]}x{side[1]}): {seconds * 1000:.1f} ms, "
          f"peak {_gib(peak)}")  # fmt: skip
    embeds = iter(images)
    seconds, peak = meter.timed(lambda: segmenter.embed(next(embeds)), repeats)
    print(f"  embed per {size[1]}x{size[0]} photo (preprocess + backbone): "
          f"{seconds * 1000:.1f} ms, peak {_gib(peak)}")  # fmt: skip

    embedding = segmenter.embed(images[0])
    for count in (1, 8):

        def segment(phrases: list[str] = PHRASES[:count]) -> None:
            embedding.segment(phrases, 0.5)

        seconds, peak = meter.timed(segment, repeats)
        print(
            f"  {count} phrase{'s' if count > 1 else ''} on cached features: "
            f"{seconds * 1000:.1f} ms, {seconds * 1000 / count:.1f} ms per phrase, "
            f"peak {_gib(peak)}"
        )


def check_mllm_round(meter: Meter, dtype: torch.dtype, repeats: int) -> None:
    from sam3_agent import AgentConfig, Sam3Agent
    from sam3_agent.backends.hf_chat import TransformersChatModel
    from tests.support.fakes import FakeSegmenter
    from tests.support.tiny_qwen import save_tiny_qwen

    device = meter.device
    dtype_name = str(dtype).removeprefix("torch.")
    with tempfile.TemporaryDirectory(prefix="tiny-qwen-") as folder:
        torch.manual_seed(0)
        save_tiny_qwen(Path(folder))
        with meter.phase() as built:
            chat = TransformersChatModel.from_pretrained(
                folder, device=str(device), dtype=dtype_name, max_new_tokens=16
            )
    print(f"MLLM: tiny random Qwen2.5-VL (tests/support/tiny_qwen.py), {dtype} on {device}")
    print(f"  load: {built['seconds']:.1f} s, peak {_gib(built['peak_gib'])}")
    # One round: the model's gibberish is corrected once and max_rounds ends the session.
    # A fake SAM 3, so that the backbone the agent starts in the background costs nothing.
    agent = Sam3Agent(FakeSegmenter(), chat, AgentConfig(max_rounds=1))
    image = photo(99, (480, 640))
    agent.run(image, "the leftmost person")  # warm-up
    chats: list[float] = []
    tokens: tuple[int, int] = (0, 0)
    peak = 0.0
    for _ in range(repeats):
        with meter.phase() as figures:
            result = agent.run(image, "the leftmost person")
        chats.append(result.timings.get("chat", float("nan")))
        usage = result.usage.main
        tokens = (usage.prompt_tokens, usage.completion_tokens)
        peak = max(peak, figures["peak_gib"]) if meter.cuda else float("nan")
    print(
        f"  one round: chat call {statistics.median(chats) * 1000:.1f} ms "
        f"({tokens[0]} prompt + {tokens[1]} completion tokens), peak {_gib(peak)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument(
        "--dtype", default=None, help="default: bfloat16 on CUDA, float32 on the CPU"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="tiny SAM 3 instead of the full-size architecture"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (median)")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: use --device cpu --tiny for the CPU smoke path")
        return 2
    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    dtype = getattr(torch, dtype_name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        print(f"device: {torch.cuda.get_device_name(device)}")
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    started = time.perf_counter()
    meter = Meter(device)
    check_sam3(meter, dtype, args.tiny, args.repeats)
    gc.collect()  # SAM 3 leaves the device before the MLLM's memory is measured
    if meter.cuda:
        torch.cuda.empty_cache()
    check_mllm_round(meter, dtype, args.repeats)
    print(f"device check done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
