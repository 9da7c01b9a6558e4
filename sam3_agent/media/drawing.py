"""The pen the renders draw with: colours, and masks placed, resized, filled, outlined and
numbered on a canvas; drawing touches only a mask's box."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from sam3_agent.values.detections import BoolArray
from sam3_agent.values.images import RGBImage

Color = tuple[int, int, int]

# Twenty colours told apart from each other; more masks continue with golden-ratio hues.
_RGB = bytes.fromhex(
    "e6194b 3cb44b ffe119 0082c8 f58230 911eb4 46f0f0 f032e6 d2f53c fabed4"
    "008080 dcbeff aa6e28 fffac8 800000 aaffc3 808000 ffd7b4 000080 808080"
)
PALETTE: tuple[Color, ...] = tuple((_RGB[i], _RGB[i + 1], _RGB[i + 2]) for i in range(0, 60, 3))

KEPT_COLOR: Color = (255, 255, 255)  # masks kept for the answer, labelled K1, K2, ...
FILL_ALPHA_256 = 115  # opacity of a mask's fill, out of 256 (about 45 %)
LABEL_BACKGROUND: Color = (20, 20, 20)
LABEL_TEXT: Color = (255, 255, 255)
LABEL_SEARCH_SIDE = 256  # label anchors are searched on the mask subsampled to this side
FONT = cv2.FONT_HERSHEY_SIMPLEX


def mask_color(index: int) -> Color:
    """The RGB colour of the mask at 0-based ``index``; the same in every run."""
    if index < len(PALETTE):
        return PALETTE[index]
    hue = (index * 0.6180339887498949) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.95)
    return round(r * 255), round(g * 255), round(b * 255)


@dataclass(frozen=True)
class Placed:
    """A mask drawn on some canvas: ``crop`` ``(h, w)`` uint8 0/1 with its top-left at
    ``(x, y)`` in canvas pixels. An empty mask has a ``(0, 0)`` crop."""

    crop: npt.NDArray[np.uint8]
    x: int
    y: int


@dataclass(frozen=True)
class Style:
    """Line and text sizes, in canvas pixels, growing with the canvas beyond 1024 px."""

    line: int
    font_scale: float
    font_thickness: int
    padding: int

    @classmethod
    def for_canvas(cls, canvas: RGBImage) -> Style:
        return cls.for_side(max(canvas.shape[:2]))

    @classmethod
    def for_side(cls, side: int) -> Style:
        """The style of a canvas whose longer side is ``side`` pixels (one not yet made)."""
        unit = max(1.0, side / 1024)
        return cls(
            line=max(1, round(2 * unit)),
            font_scale=0.6 * unit,
            font_thickness=max(1, round(1.5 * unit)),
            padding=max(2, round(3 * unit)),
        )


def downscale_mask(
    mask: BoolArray, box: list[int], sx: float, sy: float, canvas_w: int, canvas_h: int
) -> Placed:
    """``mask`` resized by ``(sx, sy)`` inside its tight ``box`` only; a non-empty mask keeps
    at least one pixel."""
    x0, y0, x1, y1 = box
    if x1 <= x0:
        return Placed(np.zeros((0, 0), dtype=np.uint8), 0, 0)
    if sx == 1.0 and sy == 1.0:
        return Placed(np.ascontiguousarray(mask[y0:y1, x0:x1]).view(np.uint8), x0, y0)
    dx0, dy0, dx1, dy1 = scale_box(box, sx, sy, canvas_w, canvas_h)
    # Source pixels covered by display pixels dx0..dx1, so the crop lines up with the image.
    src_x0, src_y0 = math.floor(dx0 / sx), math.floor(dy0 / sy)
    src_x1 = min(mask.shape[1], math.ceil(dx1 / sx))
    src_y1 = min(mask.shape[0], math.ceil(dy1 / sy))
    region = mask[src_y0:src_y1, src_x0:src_x1].view(np.uint8)
    return Placed(resize_mask(region, dx1 - dx0, dy1 - dy0), dx0, dy0)


def scale_box(
    box: Sequence[int], sx: float, sy: float, canvas_w: int, canvas_h: int
) -> tuple[int, int, int, int]:
    """The canvas pixels covering XYXY ``box`` scaled by ``(sx, sy)``, at least one a side."""
    x0, y0, x1, y1 = box
    dx0, dy0 = min(math.floor(x0 * sx), canvas_w - 1), min(math.floor(y0 * sy), canvas_h - 1)
    dx1 = max(dx0 + 1, min(canvas_w, math.ceil(x1 * sx)))
    dy1 = max(dy0 + 1, min(canvas_h, math.ceil(y1 * sy)))
    return dx0, dy0, dx1, dy1


def resize_mask(region: npt.NDArray[np.uint8], width: int, height: int) -> npt.NDArray[np.uint8]:
    """A 0/1 mask region resized to ``(height, width)`` (:func:`resample`, nearest when
    growing), keeping one pixel if the region has any."""
    out = resample(region, width, height, cv2.INTER_NEAREST)
    if not out.any():
        ys, xs = np.nonzero(region)
        if ys.size:
            mid = ys.size // 2
            oy = min(height - 1, int(ys[mid] * height / region.shape[0]))
            ox = min(width - 1, int(xs[mid] * width / region.shape[1]))
            out[oy, ox] = 1
    return np.asarray(out, dtype=np.uint8)


def rescale_placed(placed: Placed, factor: float, canvas_w: int, canvas_h: int) -> Placed:
    """``placed`` (on some canvas) scaled by ``factor`` onto a ``canvas_w`` x ``canvas_h``
    canvas; a non-empty mask keeps at least one pixel."""
    h, w = placed.crop.shape
    if h == 0:
        return placed
    box = (placed.x, placed.y, placed.x + w, placed.y + h)
    x0, y0, x1, y1 = scale_box(box, factor, factor, canvas_w, canvas_h)
    return Placed(resize_mask(placed.crop, x1 - x0, y1 - y0), x0, y0)


def resample(
    region: npt.NDArray[np.uint8], width: int, height: int, grow: int
) -> npt.NDArray[np.uint8]:
    """``region`` at ``(height, width)``: area-averaged when shrinking (0/1 stays 0/1), with
    OpenCV's ``grow`` interpolation otherwise. OpenCV's area resampling is fast only for
    whole-number ratios; the rest (under 2x) is bilinear, which does not alias there."""
    src_h, src_w = region.shape[:2]
    if width > src_w or height > src_h:
        resized = cv2.resize(np.ascontiguousarray(region), (width, height), interpolation=grow)
        return np.asarray(resized, dtype=np.uint8)
    factor = min(src_w // width, src_h // height)
    if factor >= 2:
        trimmed = np.ascontiguousarray(
            region[: (src_h // factor) * factor, : (src_w // factor) * factor]
        )
        region = np.asarray(
            cv2.resize(trimmed, (src_w // factor, src_h // factor), interpolation=cv2.INTER_AREA),
            dtype=np.uint8,
        )
    if region.shape[1] == width and region.shape[0] == height:
        return np.asarray(region, dtype=np.uint8)
    return np.asarray(
        cv2.resize(np.ascontiguousarray(region), (width, height), interpolation=cv2.INTER_LINEAR),
        dtype=np.uint8,
    )


def paste_mask(placed: Placed, x0: int, y0: int, width: int, height: int) -> npt.NDArray[np.uint8]:
    """``placed`` cut to the window ``[x0, x0 + width) x [y0, y0 + height)`` of its canvas."""
    out = np.zeros((height, width), dtype=np.uint8)
    h, w = placed.crop.shape
    ix0, iy0 = max(x0, placed.x), max(y0, placed.y)
    ix1, iy1 = min(x0 + width, placed.x + w), min(y0 + height, placed.y + h)
    if ix0 < ix1 and iy0 < iy1:
        out[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0] = placed.crop[
            iy0 - placed.y : iy1 - placed.y, ix0 - placed.x : ix1 - placed.x
        ]
    return out


def fill_mask(canvas: RGBImage, placed: Placed, color: Color) -> None:
    h, w = placed.crop.shape
    if h == 0:
        return
    region = canvas[placed.y : placed.y + h, placed.x : placed.x + w]
    alpha = FILL_ALPHA_256 / 256
    # region * (1 - alpha) + color * alpha in two OpenCV passes (cheaper than a colour array)
    tinted = cv2.addWeighted(region, 1.0 - alpha, region, 0.0, 0.0)
    offset = (color[0] * alpha, color[1] * alpha, color[2] * alpha, 0.0)
    cv2.add(tinted, offset, dst=tinted)  # type: ignore[call-overload]  # Scalar form, unstubbed
    if region.flags.c_contiguous:
        cv2.copyTo(tinted, placed.crop, region)
        return
    # Masked copy into a contiguous buffer (OpenCV writes in place only there), then back.
    blended = region.copy()
    cv2.copyTo(tinted, placed.crop, blended)
    region[...] = blended


def outline_mask(canvas: RGBImage, placed: Placed, color: Color, thickness: int) -> None:
    """The mask's outer and hole boundaries in ``color``, in place."""
    if placed.crop.shape[0] == 0:
        return
    # A zero border keeps contours closed where the mask touches the crop's edge.
    padded = cv2.copyMakeBorder(placed.crop, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    contours, _ = cv2.findContours(
        padded, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE, offset=(placed.x - 1, placed.y - 1)
    )
    cv2.drawContours(canvas, contours, -1, color, thickness, lineType=cv2.LINE_8)


def label_anchor(placed: Placed) -> tuple[int, int]:
    """``(x, y)``: the mask's canvas pixel farthest from its boundary (on a subsampled copy)."""
    h, w = placed.crop.shape
    if h == 0:
        return placed.x, placed.y
    step = max(1, math.ceil(max(h, w) / LABEL_SEARCH_SIDE))
    sub = np.ascontiguousarray(placed.crop[::step, ::step])
    padded = cv2.copyMakeBorder(sub, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    distance = cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_3)
    if distance.max() <= 0:  # the subsampling missed every pixel: one the mask has
        ys, xs = np.nonzero(placed.crop)
        return placed.x + int(xs[ys.size // 2]), placed.y + int(ys[ys.size // 2])
    sy, sx = np.unravel_index(int(np.argmax(distance)), distance.shape)
    return placed.x + (int(sx) - 1) * step, placed.y + (int(sy) - 1) * step


def draw_masks(
    canvas: RGBImage,
    masks: Sequence[tuple[Placed, Color]],
    style: Style,
    labels: Sequence[tuple[str, tuple[int, int]]] = (),
) -> None:
    """Fill, then outline every mask, then draw ``labels`` (text and anchor, one per mask, in
    its colour), so no fill covers a label; in place."""
    for placed, color in masks:
        fill_mask(canvas, placed, color)
    for placed, color in masks:
        outline_mask(canvas, placed, color, style.line)
    canvas_h, canvas_w = canvas.shape[:2]
    for (_, color), (text, anchor) in zip(masks, labels, strict=False):
        # A dark box with the text in white, edged in the mask's colour, centred on the anchor
        # and moved inside the canvas where it would cross an edge.
        (text_w, text_h), baseline = text_size(text, style)
        box_w = text_w + 2 * style.padding
        box_h = text_h + baseline + 2 * style.padding
        x0 = min(max(anchor[0] - box_w // 2, 0), max(0, canvas_w - box_w))
        y0 = min(max(anchor[1] - box_h // 2, 0), max(0, canvas_h - box_h))
        x1, y1 = x0 + box_w - 1, y0 + box_h - 1
        cv2.rectangle(canvas, (x0, y0), (x1, y1), LABEL_BACKGROUND, thickness=cv2.FILLED)
        cv2.rectangle(canvas, (x0, y0), (x1, y1), color, thickness=max(1, style.line // 2))
        put_text(canvas, text, (x0 + style.padding, y0 + style.padding + text_h), style)


def draw_numbered(
    canvas: RGBImage,
    placed: Sequence[Placed],
    numbers: Sequence[int],
    anchors: Sequence[tuple[int, int]] | None = None,
    *,
    kept: bool = False,
) -> RGBImage:
    """Mask ``placed[i]`` drawn in ``mask_color(numbers[i] - 1)`` (``kept``: in
    :data:`KEPT_COLOR`) and labelled with its number (``kept``: ``K<number>``) at ``anchors[i]``
    (:func:`label_anchor` by default), in place; returns ``canvas``."""
    anchors = [label_anchor(p) for p in placed] if anchors is None else anchors
    colors = [KEPT_COLOR if kept else mask_color(n - 1) for n in numbers]
    labels = [(f"K{n}" if kept else str(n), a) for n, a in zip(numbers, anchors, strict=True)]
    draw_masks(canvas, list(zip(placed, colors, strict=True)), Style.for_canvas(canvas), labels)
    return canvas


def text_size(text: str, style: Style) -> tuple[tuple[int, int], int]:
    size, baseline = cv2.getTextSize(text, FONT, style.font_scale, style.font_thickness)
    return (int(size[0]), int(size[1])), int(baseline)


def put_text(canvas: RGBImage, text: str, origin: tuple[int, int], style: Style) -> None:
    """``text`` in white at ``origin`` (its baseline's left end), in place."""
    cv2.putText(
        canvas, text, origin, FONT, style.font_scale, LABEL_TEXT, style.font_thickness, cv2.LINE_AA
    )


def resize_image(
    image: RGBImage, *, height: int | None = None, width: int | None = None
) -> RGBImage:
    """``image`` at ``height`` x ``width`` (one alone keeps the aspect ratio), area-averaged
    when shrinking, bilinear when enlarging; ``image`` itself when unchanged."""
    h, w = image.shape[:2]
    if height is None:
        height = h if width is None else max(1, round(h * width / w))
    if width is None:
        width = max(1, round(w * height / h))
    if (height, width) == (h, w):
        return image
    shrink = height <= h and width <= w
    interpolation = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    return np.ascontiguousarray(cv2.resize(image, (width, height), interpolation=interpolation))
