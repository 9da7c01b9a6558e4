"""Benchmark: the SAM 3 service's wire work, before and after, side by side in one process.

At a phone-photo size (default 4000x3000) with 20 detector masks (ellipses, as SAM 3 finds
objects), it times the three costs the service path adds to a segment round:

* server, masks -> RLE: the standard COCO encoding (a Fortran-order copy of every mask, as
  ``Detections.to_coco_rle`` does) against ``rle_order="rows"`` (encoded from the model's
  row-major layout, no copy);
* client, RLE -> masks: ``Detections.from_coco_rle`` (decode each, convert, stack) against
  one ``decode_masks(..., "rows")`` call (a view of pycocotools' buffer);
* upload: a level-1 PNG (encode on the client, decode on the server) against raw RGB bytes,
  with the bytes sent.

    python -m scripts.bench wire [--size 4000x3000] [--masks 20]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from sam3_agent.backends.wire import decode_masks, decode_raw, encode_masks, encode_raw
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import load_image


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def make_masks(count: int, height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    masks = np.zeros((count, height, width), dtype=np.uint8)
    for m in masks:
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (
            int(rng.integers(width // 20, width // 4)),
            int(rng.integers(height // 20, height // 4)),
        )
        cv2.ellipse(m, center, axes, float(rng.integers(0, 180)), 0, 360, 1, -1)
    return masks.view(np.bool_)


def make_photo(height: int, width: int) -> np.ndarray:
    from skimage import data

    photo = cv2.resize(np.ascontiguousarray(data.chelsea()), (width, height), cv2.INTER_CUBIC)
    noise = np.random.default_rng(1).normal(0, 3, photo.shape)  # sensor noise, as in a photo
    return np.clip(photo + noise, 0, 255).astype(np.uint8)


def row(what: str, before: float, after: float, note: str = "") -> None:
    print(
        f"{what:<34} {before * 1000:>9.0f} ms {after * 1000:>9.1f} ms "
        f"{after / before:>7.3f}  {note}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4000x3000", help="WIDTHxHEIGHT")
    parser.add_argument("--masks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    masks = make_masks(args.masks, height, width)
    detections = Detections.from_masks(masks, np.linspace(0.9, 0.5, args.masks))
    print(f"{width}x{height}, {args.masks} masks, best of {args.repeats}")
    print(f"{'step':<34} {'before':>12} {'after':>12} {'ratio':>7}")

    enc_before, coco = best_of(detections.to_coco_rle, args.repeats)
    enc_after, rows = best_of(lambda: encode_masks(masks, "rows"), args.repeats)
    row("server: masks -> RLE", enc_before, enc_after, "coco copy per mask vs rows, no copy")

    size = (height, width)
    dec_before, a = best_of(
        lambda: Detections.from_coco_rle(coco, detections.boxes, detections.scores, size),
        args.repeats,
    )
    dec_after, b = best_of(lambda: decode_masks(rows, "rows", size), args.repeats)
    if not np.array_equal(a.masks, b):
        raise SystemExit("decoded masks differ")
    row("client: RLE -> masks", dec_before, dec_after, "decode+stack vs one view")

    photo = make_photo(height, width)
    bgr = cv2.cvtColor(photo, cv2.COLOR_RGB2BGR)
    png_enc, png = best_of(
        lambda: cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])[1].tobytes(),
        args.repeats,
    )
    raw_enc, raw = best_of(lambda: encode_raw(photo), args.repeats)
    png_dec, from_png = best_of(lambda: load_image(png), args.repeats)
    raw_dec, from_raw = best_of(lambda: decode_raw(raw, height, width), args.repeats)
    if not (np.array_equal(from_png, photo) and np.array_equal(from_raw, photo)):
        raise SystemExit("uploaded pixels differ")
    row("client: encode the upload", png_enc, raw_enc, "PNG level 1 vs raw RGB")
    row("server: decode the upload", png_dec, raw_dec)
    mb = 1e6
    for link, bytes_per_s in (("1 Gbit/s", 125 * mb), ("100 Mbit/s", 12.5 * mb)):
        row(
            f"upload total on {link}",
            png_enc + png_dec + len(png) / bytes_per_s,
            raw_enc + raw_dec + len(raw) / bytes_per_s,
            f"{len(png) / mb:.1f} MB vs {len(raw) / mb:.1f} MB",
        )


if __name__ == "__main__":
    main()
