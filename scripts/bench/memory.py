"""Benchmark: peak memory of one segment round against the size of the image.

For each size (1, 12, 50 and 100 megapixels by default) a fresh subprocess loads the tiny
random SAM 3 of ``tests/support/tiny_sam3.py`` (the model's weights are a fixed cost, measured after
a warm-up round on a small image), then does what one ``segment_phrase`` round does with a
phone photo: decode the JPEG (``load_image``), run the backbone (``embed``), segment one
phrase, and apply the agent's post-processing (``masks.postprocess``). It reports the peak
RSS of that round minus the fixed cost, divided by the decoded RGB image (``H * W * 3``
bytes). Goal: under 4x. Every size runs in its own process; the peak is the process's
``VmHWM``, reset to the current RSS after the warm-up (``/proc/self/clear_refs``).

The tiny model's random scores are fixed by the image content; every size shows the same
pattern, so every size keeps the same masks (the ``masks`` column).

    python -m scripts.bench memory [--sizes 1,12,50,100] [--threshold 0.0]

Needs about 6x the largest image in free memory (100 MP: ~2 GB) and a minute per size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

ASPECT = (4, 3)  # width : height of a phone photo


def _status_bytes(field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of this process from ``/proc/self/status``, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0); False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss_bytes() -> int:
    # Not ru_maxrss: it survives exec, so a child would inherit the parent's peak.
    try:
        return _status_bytes("VmHWM")
    except (OSError, RuntimeError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _pattern(height: int, width: int) -> np.ndarray:
    """A smooth scene that looks the same at every resolution (so the scores match)."""
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:, :, 0] = (255 * ys * np.ones_like(xs)).astype(np.uint8)
    image[:, :, 1] = (255 * (0.5 + 0.5 * np.sin(6 * xs + 3 * ys))).astype(np.uint8)
    disc = ((xs - 0.4) ** 2 + (ys - 0.6) ** 2) < 0.04
    image[:, :, 2] = np.where(disc, 230, 40).astype(np.uint8)
    return image


def _write_photo(path: Path, megapixels: float) -> tuple[int, int]:
    import cv2

    pixels = megapixels * 1e6
    width = round((pixels * ASPECT[0] / ASPECT[1]) ** 0.5)
    height = round(pixels / width)
    image = _pattern(height, width)
    cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90])
    return height, width


def child(model_dir: Path, photo: Path, threshold: float) -> None:
    """One measured round; prints a JSON line."""
    import torch

    from sam3_agent.backends.sam3_local import Sam3Segmenter
    from sam3_agent.values.images import load_image
    from sam3_agent.values.masks import postprocess

    torch.set_num_threads(2)
    segmenter = Sam3Segmenter.from_pretrained(model_dir, device="cpu", dtype="float32")
    warm = _pattern(480, 640)
    segmenter.embed(warm).segment(["a disc"], threshold)
    # The fixed cost: the model and the runtime after a warm-up round. With the peak reset
    # to it, the round's own peak is measured from there.
    fixed = _status_bytes("VmRSS") if _reset_peak() else _peak_rss_bytes()
    started = time.perf_counter()
    image = load_image(photo)
    detections = segmenter.embed(image).segment(["a disc"], threshold)[0]
    kept = postprocess(detections, score_threshold=threshold, overlap_threshold=0.3)
    elapsed = time.perf_counter() - started
    peak = _peak_rss_bytes()
    print(
        json.dumps(
            {
                "height": int(image.shape[0]),
                "width": int(image.shape[1]),
                "fixed": fixed,
                "peak": peak,
                "masks": len(detections),
                "kept": len(kept),
                "seconds": elapsed,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,12,50,100", help="megapixels, comma-separated")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="score threshold (0.0 keeps every query of the tiny model: the worst case)",
    )
    parser.add_argument("--child", nargs=2, metavar=("MODEL_DIR", "PHOTO"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), args.threshold)
        return

    from tests.support.tiny_sam3 import save_tiny_sam3

    sizes = [float(s) for s in args.sizes.split(",")]
    print(
        f"{'MP':>5} {'H x W':>13} {'RGB MB':>8} {'fixed MB':>9} {'round MB':>9} "
        f"{'ratio':>6} {'masks':>5} {'masks MB':>8} {'kept':>4} {'s':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = save_tiny_sam3(Path(tmp) / "tiny_sam3")
        for megapixels in sizes:
            photo = Path(tmp) / f"photo_{megapixels:g}mp.jpg"
            _write_photo(photo, megapixels)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "scripts.bench.memory",
                    "--threshold",
                    str(args.threshold),
                    "--child",
                    str(model_dir),
                    str(photo),
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
            )
            if done.returncode != 0:
                print(f"{megapixels:>5g} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rgb = row["height"] * row["width"] * 3
            extra = row["peak"] - row["fixed"]
            print(
                f"{megapixels:>5g} {row['height']:>6}x{row['width']:<6} {rgb / 1e6:>8.0f} "
                f"{row['fixed'] / 1e6:>9.0f} {extra / 1e6:>9.0f} {extra / rgb:>6.2f} "
                f"{row['masks']:>5} {row['masks'] * rgb / 3e6:>8.0f} {row['kept']:>4} "
                f"{row['seconds']:>6.1f}"
            )
            photo.unlink()
    print("ratio = (peak RSS of the round - fixed cost) / decoded RGB bytes; goal < 4")
    print("masks MB = the segmenter's full-size bool masks (masks x H x W bytes): each adds")
    print("1/3 to the ratio, so the floor is 1 + masks / 3 (the image itself plus its masks)")


if __name__ == "__main__":
    main()
