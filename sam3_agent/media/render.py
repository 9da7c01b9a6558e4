"""Images of masks for the MLLM (numbered renders, mask checks) and ``overlay.png``. Indices
are 0-based, the numbers drawn 1-based; a fixed palette and integer drawing keep renders (and
so prompts) byte-identical across runs."""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from sam3_agent.media import drawing
from sam3_agent.media.drawing import Color, Placed, Style, mask_color
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import RGBImage, downscale

ZOOM_MARGIN = 0.25  # the zoom crop extends the mask's box by this share of its size a side
ZOOM_MIN_SIDE = 96  # smallest zoom crop side (full-resolution pixels): tiny masks keep context
ZOOM_GAP = 6  # white columns between the two halves of a zoom render
# A close-up panel's longer side: a small region is enlarged to ZOOM_PANEL_MIN (8 Qwen-VL
# tokens: its shape, not a speck), a large one reduced to ZOOM_PANEL_MAX (the context views
# show it whole); between them at its own resolution (enlarging adds tokens, not detail).
ZOOM_PANEL_MIN = 224
ZOOM_PANEL_MAX = 448
CONTEXT_SIDES: tuple[int, ...] = (448, 672)
"""Longer sides tried, smallest first, for a check's whole-image views (multiples of
Qwen-VL's 28-pixel token grid); the display size when none fits."""
CONTEXT_MIN_MASK_SIDE = 12
"""A context view is small enough once the mask's box keeps this many pixels on its shorter
side. Measured (``python -m scripts.bench tokens``): a mask shown at 12 px and scaled back
keeps a median IoU of 0.94 (0.97 at 24 px); at 1008x1008 the session's tokens fall from 0.49x
the original's (24 px) to 0.39x (12 px)."""


@dataclass(frozen=True)
class _Prepared:
    """What every render of one Detections object (and a selection from it) shares. ``boxes``:
    tight XYXY at full resolution (exclusive ends); ``anchors``: display pixels."""

    boxes: npt.NDArray[np.int64]
    display: list[Placed]
    anchors: list[tuple[int, int]]


class Renderer:
    """Renders masks on one image, downscaled once (longer side ``<= max_side``); only
    :meth:`zoom` reads the full-resolution image."""

    def __init__(self, image: RGBImage, max_side: int = 1024) -> None:
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(
                f"image must be (H, W, 3) uint8 RGB, got shape {image.shape} {image.dtype}"
            )
        if max_side < 4 * ZOOM_GAP:
            raise ValueError(f"max_side must be at least {4 * ZOOM_GAP}, got {max_side}")
        self._image = np.ascontiguousarray(image)
        self.max_side = int(max_side)
        display = downscale(self._image, self.max_side)
        self._display = display.copy() if display is self._image else display
        self._display.flags.writeable = False
        self._cache: weakref.WeakKeyDictionary[Detections, _Prepared] = weakref.WeakKeyDictionary()
        self._contexts: dict[int, RGBImage] = {}
        self._lock = threading.Lock()

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self._image.shape[0]), int(self._image.shape[1])

    @property
    def display_image(self) -> RGBImage:
        """The downscaled raw image; read-only (every render returns its own copy)."""
        return self._display

    def numbered(self, detections: Detections, kept: Detections | None = None) -> RGBImage:
        """Every mask filled with its colour, outlined and labelled with its 1-based number, at
        display size; over the ``kept`` masks, drawn apart as ``K1``, ``K2``, ..."""
        canvas = self._display.copy()
        if kept is not None and len(kept):
            below = self._prepare(kept)
            drawing.draw_numbered(
                canvas, below.display, range(1, len(kept) + 1), below.anchors, kept=True
            )
        prepared = self._prepare(detections)
        numbers = range(1, len(detections) + 1)
        return drawing.draw_numbered(canvas, prepared.display, numbers, prepared.anchors)

    def single(
        self,
        detections: Detections,
        index: int,
        side: int | None = None,
        *,
        color: Color | None = None,
    ) -> RGBImage:
        """The whole image at :meth:`context` size ``side`` with only the mask at ``index``
        drawn (filled and outlined, no number), in ``color`` or the index's own."""
        prepared = self._prepare(detections)
        _check_index(index, len(detections))
        canvas = self.context(side).copy()
        placed = prepared.display[index]
        if canvas.shape != self._display.shape:
            factor = canvas.shape[1] / self._display.shape[1]
            placed = drawing.rescale_placed(placed, factor, canvas.shape[1], canvas.shape[0])
        _draw_one(canvas, placed, mask_color(index) if color is None else color)
        return canvas

    def context(self, side: int | None = None) -> RGBImage:
        """The whole image, its longer side ``side`` (at most, and by default, the display
        size), made once per size; read-only."""
        if side is None or side >= max(self._display.shape[:2]):
            return self._display
        cached = self._contexts.get(side)  # one dict operation each: no lock needed
        if cached is None:
            cached = downscale(self._display, side)
            cached.flags.writeable = False
            cached = self._contexts.setdefault(side, cached)
        return cached

    def context_side(self, detections: Detections, index: int) -> int:
        """The smallest of :data:`CONTEXT_SIDES` at which the box of the mask at ``index`` keeps
        :data:`CONTEXT_MIN_MASK_SIDE` pixels on its shorter side, else the display size."""
        _check_index(index, len(detections))
        x0, y0, x1, y1 = detections.mask_boxes[index].tolist()
        shorter = min(x1 - x0, y1 - y0)
        display_side = max(self._display.shape[:2])
        full_side = max(self.image_size)
        for side in CONTEXT_SIDES:
            if side >= display_side:
                break
            if shorter * side / full_side >= CONTEXT_MIN_MASK_SIDE:
                return side
        return display_side

    def zoom(self, detections: Detections, index: int, *, color: Color | None = None) -> RGBImage:
        """The neighbourhood of the mask at ``index`` twice side by side, plain and with the
        mask drawn; each panel at the crop's own resolution within
        :data:`ZOOM_PANEL_MIN`..:data:`ZOOM_PANEL_MAX`, the whole within ``max_side``."""
        prepared = self._prepare(detections)
        _check_index(index, len(detections))
        height, width = self.image_size
        x0, y0, x1, y1 = _zoom_window(prepared.boxes[index].tolist(), width, height)
        crop_w, crop_h = x1 - x0, y1 - y0
        longer = max(crop_w, crop_h)
        scale = min(max(1.0, ZOOM_PANEL_MIN / longer), ZOOM_PANEL_MAX / longer)
        scale = min(scale, (self.max_side - ZOOM_GAP) / max(2 * crop_w, crop_h))
        panel_w, panel_h = max(1, math.floor(crop_w * scale)), max(1, math.floor(crop_h * scale))

        display_h, display_w = self._display.shape[:2]
        sx, sy = display_w / width, display_h / height
        if scale <= sx and scale <= sy:  # the display image holds every detail a panel can show
            dx0, dy0, dx1, dy1 = drawing.scale_box((x0, y0, x1, y1), sx, sy, display_w, display_h)
            image_region = self._display[dy0:dy1, dx0:dx1]
            mask_region = drawing.paste_mask(
                prepared.display[index], dx0, dy0, dx1 - dx0, dy1 - dy0
            )
        else:
            image_region = self._image[y0:y1, x0:x1]
            mask_region = detections.masks[index, y0:y1, x0:x1].view(np.uint8)

        plain = drawing.resample(image_region, panel_w, panel_h, cv2.INTER_LINEAR)
        placed = Placed(drawing.resize_mask(mask_region, panel_w, panel_h), 0, 0)
        drawn = plain.copy()
        _draw_one(drawn, placed, mask_color(index) if color is None else color)
        return side_by_side([plain, drawn], ZOOM_GAP)

    def _prepare(self, detections: Detections) -> _Prepared:
        """Display-size masks and label anchors, once per ``detections`` (cached weakly)."""
        if detections.image_size != self.image_size:
            raise ValueError(
                f"detections are for an image of {detections.image_size} (height, width), "
                f"the renderer's image is {self.image_size}"
            )
        with self._lock:
            cached = self._cache.get(detections)
            origin = detections.origin
            parent = None if origin is None else self._cache.get(origin[0])
        if cached is not None:
            return cached
        if parent is not None and origin is not None:
            # Selected from masks already prepared (the survivors of a check): reuse them.
            picks = origin[1].tolist()
            prepared = _Prepared(
                boxes=parent.boxes[origin[1]],
                display=[parent.display[i] for i in picks],
                anchors=[parent.anchors[i] for i in picks],
            )
        else:
            height, width = self.image_size
            display_h, display_w = self._display.shape[:2]
            boxes = detections.mask_boxes
            sx, sy = display_w / width, display_h / height
            display = [
                drawing.downscale_mask(mask, box, sx, sy, display_w, display_h)
                for mask, box in zip(detections.masks, boxes.tolist(), strict=True)
            ]
            prepared = _Prepared(boxes, display, [drawing.label_anchor(p) for p in display])
        with self._lock:
            self._cache[detections] = prepared
        return prepared


def overlay(image: RGBImage, detections: Detections) -> RGBImage:
    """Full-resolution render of every mask (colour, outline, number) for ``overlay.png``."""
    return Renderer(image, max_side=max(*image.shape[:2], 4 * ZOOM_GAP)).numbered(detections)


def _draw_one(canvas: RGBImage, placed: Placed, color: Color) -> None:
    drawing.draw_masks(canvas, [(placed, color)], Style.for_canvas(canvas))


def side_by_side(panels: list[RGBImage], gap: int) -> RGBImage:
    """``panels`` left to right, top-aligned, ``gap`` white columns apart."""
    height = max(p.shape[0] for p in panels)
    width = sum(p.shape[1] for p in panels) + gap * (len(panels) - 1)
    out = np.full((height, width, 3), 255, dtype=np.uint8)
    x = 0
    for panel in panels:
        out[: panel.shape[0], x : x + panel.shape[1]] = panel
        x += panel.shape[1] + gap
    return out


def _check_index(index: int, count: int) -> None:
    if not 0 <= index < count:
        raise IndexError(f"mask index must be in [0, {count - 1}] (0-based), got {index}")


def _zoom_window(box: list[int], width: int, height: int) -> tuple[int, int, int, int]:
    bx0, by0, bx1, by1 = box

    def span(lo: int, hi: int, limit: int) -> tuple[int, int]:
        size = hi - lo
        side = min(limit, max(round(size * (1 + 2 * ZOOM_MARGIN)), ZOOM_MIN_SIDE))
        start = round((lo + hi) / 2 - side / 2)
        start = min(max(start, 0), limit - side)
        return start, start + side

    x0, x1 = span(bx0, bx1, width)
    y0, y1 = span(by0, by1, height)
    return x0, y0, x1, y1


LEGEND_MAX_ROWS = 12  # masks listed one per row in a legend; one more row sums up the rest
LEGEND_QUERY_CHARS = 60  # the query is cut to this many characters in a legend


def legend(canvas: RGBImage, query: str, detections: Detections) -> RGBImage:
    """A copy of ``canvas`` (an :func:`overlay` of ``detections``) with a legend top left: the
    query (OpenCV's font is ASCII: other characters show as ``?``), then per mask its colour,
    1-based number and score."""
    return score_legend(canvas, query, detections.scores.tolist())


def score_legend(canvas: RGBImage, query: str, scores: Sequence[float]) -> RGBImage:
    """:func:`legend` for anything numbered 1, 2, ... with a score each (mask tracks too)."""
    out = np.array(canvas, dtype=np.uint8, copy=True, order="C")
    style = Style.for_canvas(out)
    shown = query if len(query) <= LEGEND_QUERY_CHARS else query[: LEGEND_QUERY_CHARS - 3] + "..."
    shown = shown.encode("ascii", "replace").decode("ascii").replace("\n", " ")
    rows: list[tuple[str, Color | None]] = [(f"query: {shown}", None)]
    scores = list(scores)
    for i, score in enumerate(scores[:LEGEND_MAX_ROWS]):
        rows.append((f"{i + 1}: score {score:.2f}", mask_color(i)))
    if len(scores) > LEGEND_MAX_ROWS:
        rows.append((f"... {len(scores) - LEGEND_MAX_ROWS} more", None))
    if not scores:
        rows.append(("no mask", None))
    sizes = [drawing.text_size(t, style) for t, _ in rows]
    row_h = max(h + base for (_, h), base in sizes) + style.padding
    swatch = row_h - style.padding
    width = max(w for (w, _), _ in sizes) + swatch + 4 * style.padding
    height = row_h * len(rows) + 2 * style.padding
    canvas_h, canvas_w = out.shape[:2]
    x1, y1 = min(width, canvas_w), min(height, canvas_h)
    # A darkened box, not an opaque one: what lies under the legend stays faintly visible.
    region = out[:y1, :x1].astype(np.uint16)
    out[:y1, :x1] = (region * 3 // 10).astype(np.uint8)
    for row, ((text, color), ((_, text_h), _)) in enumerate(zip(rows, sizes, strict=True)):
        top = style.padding + row * row_h
        x = style.padding
        if color is not None:
            cv2.rectangle(out, (x, top), (x + swatch, top + swatch), color, thickness=cv2.FILLED)
            x += swatch + style.padding
        drawing.put_text(out, text, (x, top + text_h), style)
    return out
