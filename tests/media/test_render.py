"""Tests for :mod:`sam3_agent.media.render`: shapes, where pixels change, labels, determinism."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from sam3_agent.media.drawing import LABEL_BACKGROUND, LABEL_TEXT, PALETTE, mask_color
from sam3_agent.media.render import (
    ZOOM_GAP,
    ZOOM_PANEL_MAX,
    ZOOM_PANEL_MIN,
    Renderer,
    legend,
    overlay,
    score_legend,
)
from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.images import RGBImage, downscale

H, W = 300, 480
MAX_SIDE = 240  # display is half size: 150 x 240


def make_image(h: int = H, w: int = W) -> RGBImage:
    rng = np.random.default_rng(7)
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def rect(y0: int, x0: int, y1: int, x1: int, h: int = H, w: int = W) -> np.ndarray:
    m = np.zeros((h, w), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


# All masks lie in the left 300 columns; columns from 360 on are "far from every mask".
MASKS = [rect(20, 20, 140, 160), rect(150, 40, 280, 200), rect(60, 180, 200, 300)]
FAR_X = 360


@pytest.fixture
def image() -> RGBImage:
    return make_image()


@pytest.fixture
def detections() -> Detections:
    return Detections.from_masks(np.stack(MASKS), [0.9, 0.8, 0.7])


@pytest.fixture
def renderer(image: RGBImage) -> Renderer:
    return Renderer(image, max_side=MAX_SIDE)


def changed(render: RGBImage, base: RGBImage) -> np.ndarray:
    """``(h, w)`` bool: pixels where any channel differs."""
    return np.any(render != base, axis=2)


def has_color(pixels: np.ndarray, color: tuple[int, int, int]) -> bool:
    return bool(np.any(np.all(pixels.reshape(-1, 3) == color, axis=1)))


@pytest.mark.parametrize(
    ("shape", "max_side", "expected"),
    [
        pytest.param((300, 480), 240, (150, 240), id="landscape-halved"),
        pytest.param((480, 300), 240, (240, 150), id="portrait-halved"),
        pytest.param((300, 480), 1024, (300, 480), id="never-enlarged"),
        pytest.param((2000, 3000), 1024, (683, 1024), id="photo"),
    ],
)
def test_display_image_size(
    shape: tuple[int, int], max_side: int, expected: tuple[int, int]
) -> None:
    image = make_image(*shape)
    display = Renderer(image, max_side=max_side).display_image
    assert display.shape == (*expected, 3)
    assert display.dtype == np.uint8
    np.testing.assert_array_equal(display, downscale(image, max_side))


def test_display_image_is_read_only_but_input_is_not(image: RGBImage) -> None:
    renderer = Renderer(image, max_side=1024)
    assert not renderer.display_image.flags.writeable
    assert image.flags.writeable
    out = renderer.numbered(Detections.empty(H, W))
    out[0, 0] = 0  # renders are the caller's own copies


@pytest.mark.parametrize("max_side", [MAX_SIDE, 1024])
def test_numbered_marks_masks_and_leaves_the_rest(
    image: RGBImage, detections: Detections, max_side: int
) -> None:
    renderer = Renderer(image, max_side=max_side)
    base = renderer.display_image
    out = renderer.numbered(detections)
    assert out.shape == base.shape and out.dtype == np.uint8
    diff = changed(out, base)
    s = base.shape[1] / W
    # A point a quarter of the way into each mask: filled, but away from label and outline.
    for y0, x0, y1, x1 in [(20, 20, 140, 160), (150, 40, 280, 200), (60, 180, 200, 300)]:
        assert diff[int((y0 + (y1 - y0) / 4) * s), int((x0 + (x1 - x0) / 4) * s)]
    assert not diff[:, int(FAR_X * s) :].any()


def test_numbered_labels_each_mask_near_its_centre(
    renderer: Renderer, detections: Detections
) -> None:
    out = renderer.numbered(detections)
    for y0, x0, y1, x1 in [(20, 20, 140, 160), (150, 40, 280, 200), (60, 180, 200, 300)]:
        cy, cx = (y0 + y1) // 4, (x0 + x1) // 4  # centre, at display scale (1/2)
        near = out[cy - 6 : cy + 7, cx - 8 : cx + 9]
        assert has_color(near, LABEL_BACKGROUND)
        assert has_color(near, LABEL_TEXT)


def test_numbered_uses_the_palette_in_index_order(
    renderer: Renderer, detections: Detections
) -> None:
    out = renderer.numbered(detections)
    for i, (y0, x0, y1, _x1) in enumerate([(20, 20, 140, 160), (150, 40, 280, 200)]):
        outline_row = out[(y0 + y1) // 4, x0 // 2 - 1 : x0 // 2 + 2]
        assert has_color(outline_row, PALETTE[i])


def test_empty_detections_render_the_display_image(image: RGBImage, renderer: Renderer) -> None:
    empty = Detections.empty(H, W)
    np.testing.assert_array_equal(renderer.numbered(empty), renderer.display_image)
    np.testing.assert_array_equal(overlay(image, empty), image)


def test_single_draws_only_that_mask(renderer: Renderer, detections: Detections) -> None:
    base = renderer.display_image
    out = renderer.single(detections, 1)
    assert out.shape == base.shape
    diff = changed(out, base)
    assert diff[(150 + 30) // 2, (40 + 40) // 2]  # inside mask 1
    assert not diff[(20 + 30) // 2, (20 + 30) // 2]  # inside mask 0 only
    assert not diff[: 140 // 2].any()  # rows above mask 1
    assert not has_color(out, LABEL_BACKGROUND)


def test_a_mask_can_be_drawn_in_another_numbers_colour(
    renderer: Renderer, detections: Detections
) -> None:
    """A track checked alone keeps the colour of its number on the sheets."""
    other = mask_color(6)
    for out in (
        renderer.single(detections, 1, color=other),
        renderer.zoom(detections, 1, color=other),
    ):
        assert has_color(out, other) and not has_color(out, mask_color(1))


def test_a_score_legend_is_the_legend_of_anything_scored(
    image: RGBImage, detections: Detections
) -> None:
    scores = detections.scores.tolist()
    drawn = score_legend(image, "squares", scores)
    assert np.array_equal(drawn, legend(image, "squares", detections))
    for i in range(len(scores)):
        assert has_color(drawn, mask_color(i))
    assert not has_color(score_legend(image, "squares", scores[:1]), mask_color(1))


@pytest.mark.parametrize("index", [0, 1, 2])
def test_zoom_halves_show_plain_and_marked_crop(
    renderer: Renderer, detections: Detections, index: int
) -> None:
    out = renderer.zoom(detections, index)
    assert out.dtype == np.uint8 and out.ndim == 3
    assert max(out.shape[:2]) <= MAX_SIDE
    panel_w = (out.shape[1] - ZOOM_GAP) // 2
    left, right = out[:, :panel_w], out[:, panel_w + ZOOM_GAP :]
    assert np.all(out[:, panel_w : panel_w + ZOOM_GAP] == 255)
    diff = changed(right, left)
    assert diff.mean() > 0.2  # the mask covers much of its own neighbourhood
    assert not diff.all()  # and the margin around it stays plain
    assert has_color(right, mask_color(index))


@pytest.mark.parametrize(
    ("shape", "max_side"),
    [
        pytest.param((300, 480), 240, id="small-image"),
        pytest.param((2000, 3000), 1024, id="photo"),
    ],
)
def test_zoom_of_a_three_pixel_mask_is_visible(shape: tuple[int, int], max_side: int) -> None:
    h, w = shape
    mask = np.zeros((1, h, w), dtype=bool)
    mask[0, h // 3, w // 3 : w // 3 + 3] = True
    renderer = Renderer(make_image(h, w), max_side=max_side)
    out = renderer.zoom(Detections.from_masks(mask, [0.9]), 0)
    # A small region is enlarged to ZOOM_PANEL_MIN a panel, within max_side in all.
    assert max(out.shape[:2]) <= max_side
    assert out.shape[0] >= min(ZOOM_PANEL_MIN, (max_side - ZOOM_GAP) // 2) - 1
    panel_w = (out.shape[1] - ZOOM_GAP) // 2
    marked = changed(out[:, panel_w + ZOOM_GAP :], out[:, :panel_w])
    assert marked.sum() >= 9  # the mask is enlarged, not a speck
    # The tiny mask also survives downscaling in the whole-image renders.
    assert changed(
        renderer.numbered(Detections.from_masks(mask, [0.9])), renderer.display_image
    ).any()


@pytest.mark.parametrize(
    "mask",
    [
        pytest.param(rect(0, 0, H, W), id="whole-image"),
        pytest.param(rect(0, W - 5, 5, W), id="corner"),
        pytest.param(rect(H - 1, 0, H, W), id="bottom-row"),
    ],
)
def test_masks_at_the_edges_render(image: RGBImage, mask: np.ndarray) -> None:
    renderer = Renderer(image, max_side=MAX_SIDE)
    detections = Detections.from_masks(mask[None], [0.9])
    for out in (renderer.numbered(detections), renderer.single(detections, 0)):
        assert out.shape == renderer.display_image.shape
        assert changed(out, renderer.display_image).any()
    assert max(renderer.zoom(detections, 0).shape[:2]) <= MAX_SIDE
    assert overlay(image, detections).shape == image.shape


def test_overlay_is_full_resolution(image: RGBImage, detections: Detections) -> None:
    out = overlay(image, detections)
    assert out.shape == image.shape and out.dtype == np.uint8
    diff = changed(out, image)
    assert diff[50, 50] and diff[200, 80] and diff[100, 220]
    assert not diff[:, FAR_X:].any()
    assert has_color(out[70:90, 80:100], LABEL_TEXT)
    assert image.flags.writeable and not np.shares_memory(out, image)


def test_renders_are_deterministic(image: RGBImage, detections: Detections) -> None:
    def all_renders() -> list[bytes]:
        renderer = Renderer(image.copy(), max_side=MAX_SIDE)
        again = Detections(detections.masks.copy(), detections.boxes, detections.scores)
        renders = [renderer.numbered(again), overlay(image, again)]
        for i in range(len(again)):
            renders += [renderer.single(again, i), renderer.zoom(again, i)]
        return [r.tobytes() for r in renders]

    assert all_renders() == all_renders()


def test_prepared_masks_are_cached_per_detections_object(renderer: Renderer) -> None:
    detections = Detections.from_masks(np.stack(MASKS), [0.9, 0.8, 0.7])
    first = renderer._prepare(detections)
    assert renderer._prepare(detections) is first
    other = Detections(detections.masks, detections.boxes, detections.scores)
    assert renderer._prepare(other) is not first
    del detections, other, first
    gc.collect()
    assert len(renderer._cache) == 0


def test_rejects_detections_for_another_image(renderer: Renderer) -> None:
    with pytest.raises(ValueError, match="renderer's image"):
        renderer.numbered(Detections.empty(H + 1, W))


@pytest.mark.parametrize("index", [-1, 3])
def test_rejects_index_out_of_range(renderer: Renderer, detections: Detections, index: int) -> None:
    with pytest.raises(IndexError, match="0-based"):
        renderer.single(detections, index)
    with pytest.raises(IndexError, match="0-based"):
        renderer.zoom(detections, index)


@pytest.mark.parametrize(
    "image",
    [
        pytest.param(np.zeros((10, 10), np.uint8), id="grey"),
        pytest.param(np.zeros((10, 10, 3), np.float32), id="float"),
    ],
)
def test_rejects_non_rgb_images(image: np.ndarray) -> None:
    with pytest.raises(ValueError, match="uint8 RGB"):
        Renderer(image)


def test_mask_colors_are_distinct_and_stable() -> None:
    colors = [mask_color(i) for i in range(60)]
    assert len(set(colors[: len(PALETTE)])) == len(PALETTE)
    assert len(set(colors)) == 60
    assert colors == [mask_color(i) for i in range(60)]
    assert all(0 <= c <= 255 for color in colors for c in color)


def test_a_selection_reuses_the_prepared_masks_of_its_parent(
    renderer: Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sam3_agent.media import drawing

    detections = Detections.from_masks(np.stack(MASKS), [0.9, 0.8, 0.7])
    calls: list[int] = []
    original = drawing.downscale_mask
    monkeypatch.setattr(
        drawing,
        "downscale_mask",
        lambda *args: calls.append(1) or original(*args),
    )
    renderer.numbered(detections)
    survivors = detections[[0, 2]]
    image = renderer.numbered(survivors)
    assert len(calls) == len(MASKS)  # the survivors were not downscaled again
    fresh = Detections(survivors.masks, survivors.boxes, survivors.scores)
    np.testing.assert_array_equal(image, Renderer(make_image(), MAX_SIDE).numbered(fresh))


def test_renders_never_scan_masks_for_boxes_again(
    image: RGBImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Post-processing computes the tight boxes; renders, zooms, a selection and the
    overlay all reuse them."""
    import sam3_agent.values.detections as detections_module
    from sam3_agent.values.masks import postprocess

    raw = Detections(np.stack(MASKS), np.zeros((3, 4)), [0.9, 0.8, 0.7])
    kept = postprocess(raw, overlap_threshold=0.9)

    def no_scan(masks: np.ndarray) -> np.ndarray:
        raise AssertionError("tight boxes recomputed")

    monkeypatch.setattr(detections_module, "tight_boxes", no_scan)
    renderer = Renderer(image, max_side=MAX_SIDE)
    renderer.numbered(kept)
    for i in range(len(kept)):
        renderer.single(kept, i)
        renderer.zoom(kept, i)
    survivors = kept[[0, 2]]
    renderer.numbered(survivors)
    overlay(image, survivors)
    monkeypatch.undo()
    np.testing.assert_array_equal(kept.mask_boxes, tight_boxes(kept.masks).astype(np.int64))


@pytest.mark.parametrize(
    ("box_side", "expected"),
    [(20, (ZOOM_PANEL_MIN, ZOOM_PANEL_MIN)), (200, (300, 300)), (1200, (ZOOM_PANEL_MAX,) * 2)],
    ids=["small-enlarged", "own-resolution", "large-reduced"],
)
def test_close_up_is_no_larger_than_the_region_warrants(
    box_side: int, expected: tuple[int, int]
) -> None:
    h, w = 2000, 3000
    mask = np.zeros((1, h, w), dtype=bool)
    mask[0, 500 : 500 + box_side, 700 : 700 + box_side] = True
    out = Renderer(make_image(h, w), 1024).zoom(Detections.from_masks(mask, [0.9]), 0)
    panel_w = (out.shape[1] - ZOOM_GAP) // 2
    # The crop is the box grown by a quarter on each side (at least ZOOM_MIN_SIDE).
    assert (out.shape[0], panel_w) == pytest.approx(expected, abs=1)


@pytest.mark.parametrize(
    ("box_side", "side"), [(8, 1024), (60, 672), (200, 448)], ids=["tiny", "small", "large"]
)
def test_context_views_are_as_small_as_keeps_the_mask_visible(box_side: int, side: int) -> None:
    h, w = 2000, 3000
    mask = np.zeros((1, h, w), dtype=bool)
    mask[0, 900 : 900 + box_side, 1400 : 1400 + box_side] = True
    detections = Detections.from_masks(mask, [0.9])
    renderer = Renderer(make_image(h, w), 1024)
    assert renderer.context_side(detections, 0) == side
    view = renderer.single(detections, 0, side)
    assert max(view.shape[:2]) == side
    assert changed(view, renderer.context(side)).any()
    assert renderer.context(side) is renderer.context(side)  # made once per size
