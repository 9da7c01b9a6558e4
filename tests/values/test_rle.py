"""The COCO RLE codec: the bytes pycocotools writes, and back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pycocotools import mask as mask_utils

from sam3_agent.values.rle import (
    decode_rle,
    encode_rle,
    rle_area,
    rle_intersection_area,
    rle_union,
)

shapes = st.tuples(st.integers(1, 9), st.integers(1, 9))


def pycocotools_rle(mask: np.ndarray) -> dict[str, object]:
    encoded = mask_utils.encode(np.asfortranarray(mask, dtype=np.uint8))
    return {"size": [mask.shape[0], mask.shape[1]], "counts": encoded["counts"].decode()}


@st.composite
def small_objects(draw: st.DrawFn) -> np.ndarray:
    """A random patch placed in a larger image (its box under half the image)."""
    h, w = draw(st.integers(4, 40)), draw(st.integers(4, 40))
    patch = draw(arrays(np.bool_, (draw(st.integers(1, h // 2)), draw(st.integers(1, w // 2)))))
    y, x = draw(st.integers(0, h - patch.shape[0])), draw(st.integers(0, w - patch.shape[1]))
    mask = np.zeros((h, w), dtype=bool)
    mask[y : y + patch.shape[0], x : x + patch.shape[1]] = patch
    return mask


@settings(max_examples=300, deadline=None)
@given(mask=arrays(np.bool_, shapes) | small_objects())
def test_encoding_is_the_bytes_pycocotools_writes(mask: np.ndarray) -> None:
    assert encode_rle(mask) == pycocotools_rle(mask)
    np.testing.assert_array_equal(decode_rle(encode_rle(mask)), mask)


@pytest.mark.parametrize("shape", [(7, 5), (1, 1), (1, 9), (9, 1), (64, 48)])
@pytest.mark.parametrize(
    "fill",
    ["empty", "full", "full height", "full width", "first pixel", "last pixel", "one pixel"],
)
def test_encoding_edges(shape: tuple[int, int], fill: str) -> None:
    mask = np.zeros(shape, dtype=bool)
    h, w = shape
    if fill == "full":
        mask[:] = True
    elif fill == "full height":
        mask[:, w // 3 : max(w // 3 + 1, 2 * w // 3)] = True
    elif fill == "full width":
        mask[h // 3 : max(h // 3 + 1, 2 * h // 3)] = True
    elif fill == "first pixel":
        mask[0, 0] = True
    elif fill == "last pixel":
        mask[-1, -1] = True
    elif fill == "one pixel":
        mask[h // 2, w // 2] = True
    assert encode_rle(mask) == pycocotools_rle(mask)


def test_decoding_takes_bytes_counts_and_a_non_bool_mask_is_read_as_bool() -> None:
    mask = np.eye(4, 6, dtype=np.uint8) * 255
    rle = encode_rle(mask)  # type: ignore[arg-type]
    assert rle == pycocotools_rle(mask > 0)
    as_bytes = {"size": rle["size"], "counts": rle["counts"].encode()}
    np.testing.assert_array_equal(decode_rle(as_bytes), mask > 0)


@settings(max_examples=100, deadline=None)
@given(
    masks=shapes.flatmap(lambda shape: st.lists(arrays(np.bool_, shape), min_size=2, max_size=4))
)
def test_area_union_and_intersection_count_the_pixels(masks: list[np.ndarray]) -> None:
    rles = [encode_rle(m) for m in masks]
    assert [rle_area(r) for r in rles] == [int(m.sum()) for m in masks]
    np.testing.assert_array_equal(rle_union(rles), np.any(masks, axis=0))
    assert rle_intersection_area(rles[0], rles[1]) == int((masks[0] & masks[1]).sum())
