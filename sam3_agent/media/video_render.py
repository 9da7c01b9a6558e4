"""Grid images of a clip's frames with mask tracks: the sheets and track checks the MLLM
sees, and the result's contact sheet. Track ``n`` is drawn in ``mask_color(n - 1)``; cells
are captioned with the frame's *source* index (as ``frames_used`` counts)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from sam3_agent.media.drawing import (
    LABEL_BACKGROUND,
    LABEL_TEXT,
    Color,
    Placed,
    Style,
    downscale_mask,
    draw_masks,
    label_anchor,
    mask_color,
    put_text,
    resize_image,
    text_size,
)
from sam3_agent.media.render import LEGEND_QUERY_CHARS, ZOOM_GAP, Renderer
from sam3_agent.media.sheet_layout import (
    SheetGrid,
    caption_height,
    gap_for,
    sample_positions,
    sheet_grid,
)
from sam3_agent.media.video import Frame, VideoSource
from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.images import RGBImage
from sam3_agent.values.rle import decode_rle
from sam3_agent.values.text import one_line
from sam3_agent.values.tracks import Track, Tracks

BACKGROUND: Color = (255, 255, 255)
"""Between cells, as between the halves of a zoom render."""


def render_sheet(
    video: VideoSource,
    positions: Sequence[int],
    tracks: Tracks | None,
    *,
    max_side: int,
    numbers: Sequence[int] | None = None,
) -> RGBImage:
    """One image of the frames at ``positions`` (increasing, repeats once), each cell
    captioned ``frame <index> · <time> s`` with the tracks present there drawn and
    labelled with their ``numbers`` (default ``1..N``); ``max(h, w) <= max_side``."""
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError("a sheet needs at least one frame position")
    shown = _numbers(tracks, numbers)
    check_tracks(video, tracks)
    grid = sheet_grid(len(chosen), video.size, max_side)
    return _compose(video, chosen, tracks, shown, grid)


def render_track_check(
    video: VideoSource,
    track: Track,
    positions: Sequence[int],
    *,
    max_side: int,
    number: int,
) -> RGBImage:
    """What an isolated check of one track sees: for each frame at ``positions`` a captioned
    cell with the whole frame, the track drawn in ``mask_color(number - 1)``, and beside it
    the image checker's close-up (:meth:`~sam3_agent.media.render.Renderer.zoom`); where
    the track is absent, the frame alone, its caption saying so; ``max(h, w) <= max_side``."""
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError("a track check needs at least one frame position")
    if number < 1:
        raise ValueError(f"track numbers start at 1, got {number}")
    some = next(iter(track.masks.values()), None)
    if some is not None and tuple(some["size"]) != video.size:
        raise ValueError(f"the track's masks are {tuple(some['size'])}, the video's {video.size}")
    height, width = video.size
    # A cell holds the frame and two close-up panels about as high as it: plan the grid for
    # frames of that shape, then fit each cell's content into its slot.
    grid = sheet_grid(len(chosen), (height, width + 2 * height), max_side)
    style = grid.style
    slot_h, slot_w = grid.cell
    context_h = slot_h
    context_w = max(1, math.floor(width * context_h / height))
    sheet = np.full((*grid.size, 3), BACKGROUND, dtype=np.uint8)
    color = mask_color(number - 1)
    for i, frame in enumerate(video.frames(chosen)):
        parts = _frame_caption(frame)
        renderer = Renderer(frame.pixels, max_side=max(context_h, context_w, 4 * ZOOM_GAP))
        mask = track.mask(frame.position)
        if mask is None or not mask.any():
            panels = [renderer.display_image]
            parts.append("not present")
        else:
            box = _box_of(track, frame.position, mask)[None]
            detections = Detections(mask[None], box, np.array([track.score])).with_mask_boxes(box)
            panels = [
                renderer.single(detections, 0, color=color),
                renderer.zoom(detections, 0, color=color),
            ]
        cell = _side_by_side([resize_image(p, height=context_h) for p in panels], ZOOM_GAP)
        if cell.shape[1] > slot_w:
            cell = resize_image(cell, width=slot_w)
        x, y = grid.frame_origin(i)
        sheet[y : y + cell.shape[0], x : x + cell.shape[1]] = cell
        _paste_caption(sheet, x, y - grid.caption, slot_w, grid.caption, parts, style)
    return sheet


def contact_sheet(
    video: VideoSource,
    tracks: Tracks | None,
    *,
    columns: int = 4,
    count: int = 8,
    cell_side: int = 320,
    query: str | None = None,
    positions: Sequence[int] | None = None,
) -> RGBImage:
    """The result's sheet: ``count`` frames chosen by :func:`sample_positions` (or
    ``positions``), ``columns`` to a row, each at most ``cell_side`` pixels on its longer
    side (never enlarged), tracks drawn as on :func:`render_sheet`; ``query`` on a header
    line."""
    if columns < 1 or cell_side < 1:
        raise ValueError(f"columns and cell_side must be positive, got {columns}, {cell_side}")
    check_tracks(video, tracks)
    if positions is None:
        positions = sample_positions(tracks, video.frame_count, count)
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError("a contact sheet needs at least one frame position")
    height, width = video.size
    scale = min(1.0, cell_side / max(height, width))
    cell = (max(1, math.floor(height * scale)), max(1, math.floor(width * scale)))
    style = Style.for_side(max(cell))
    caption = caption_height(style)
    columns = min(columns, len(chosen))
    grid = SheetGrid(
        count=len(chosen),
        columns=columns,
        rows=math.ceil(len(chosen) / columns),
        cell=cell,
        caption=caption,
        gap=gap_for(style),
        top=0 if query is None else caption + gap_for(style),
    )
    sheet = _compose(video, chosen, tracks, _numbers(tracks, None), grid)
    if query is not None:
        line = f"query: {one_line(query, LEGEND_QUERY_CHARS)}"
        _paste_caption(sheet, 0, 0, grid.size[1], caption, [line], style)
    return sheet


def _compose(
    video: VideoSource,
    positions: list[int],
    tracks: Tracks | None,
    numbers: list[int],
    grid: SheetGrid,
) -> RGBImage:
    style = grid.style
    sheet = np.full((*grid.size, 3), BACKGROUND, dtype=np.uint8)
    cell_h, cell_w = grid.cell
    for i, frame in enumerate(video.frames(positions)):
        cell = resize_image(frame.pixels, height=cell_h, width=cell_w)
        if cell is frame.pixels:
            cell = cell.copy()
        if tracks is not None:
            draw_tracks(cell, tracks, frame.position, numbers, style)
        x, y = grid.frame_origin(i)
        sheet[y : y + cell_h, x : x + cell_w] = cell
        caption = _frame_caption(frame)
        _paste_caption(sheet, x, y - grid.caption, cell_w, grid.caption, caption, style)
    return sheet


def draw_tracks(
    canvas: RGBImage, tracks: Tracks, position: int, numbers: list[int], style: Style
) -> None:
    """The tracks present at ``position`` on ``canvas`` (the frame at any size), in place,
    drawn as on image renders, each labelled with its number in ``numbers``."""
    canvas_h, canvas_w = canvas.shape[:2]
    height, width = tracks.size
    sx, sy = canvas_w / width, canvas_h / height
    drawn: list[tuple[Placed, Color]] = []
    labels: list[tuple[str, tuple[int, int]]] = []
    for track, number in zip(tracks, numbers, strict=True):
        rle = track.masks.get(position)
        if rle is None:
            continue
        mask = decode_rle(rle)
        box = _box_of(track, position, mask)
        placed = downscale_mask(mask, box.tolist(), sx, sy, canvas_w, canvas_h)
        if placed.crop.size and placed.crop.any():
            drawn.append((placed, mask_color(number - 1)))
            labels.append((str(number), label_anchor(placed)))
    draw_masks(canvas, drawn, style, labels)


def _box_of(track: Track, position: int, mask: np.ndarray) -> np.ndarray:
    """The mask's tight integer XYXY box (exclusive ends): the track's own, inside the frame,
    where it has one; computed from the mask otherwise."""
    box = track.boxes.get(position)
    height, width = mask.shape
    if box is None:
        return tight_boxes(mask[None])[0].astype(np.int64)
    x0, y0 = max(0, math.floor(box[0])), max(0, math.floor(box[1]))
    x1, y1 = min(width, math.ceil(box[2])), min(height, math.ceil(box[3]))
    return np.array([x0, y0, max(x0, x1), max(y0, y1)], dtype=np.int64)


def _frame_caption(frame: Frame) -> list[str]:
    parts = [f"frame {frame.index}"]
    if frame.time_s is not None:
        parts.append(f"{frame.time_s:.1f} s")
    return parts


def _paste_caption(
    canvas: RGBImage, x: int, y: int, width: int, height: int, parts: list[str], style: Style
) -> None:
    """A dark strip at ``(x, y)`` with ``parts`` in white separated by middle dots (drawn:
    OpenCV's font is ASCII, and so is the text, other characters shown as ``?``). Text that
    does not fit the strip is cut at its edge."""
    strip = np.empty((height, width, 3), dtype=np.uint8)
    strip[:] = LABEL_BACKGROUND
    (_, text_h), _ = text_size("Ag0", style)
    baseline_y = style.padding + text_h
    radius = max(1, round(2 * style.font_scale))
    cursor = style.padding
    for k, part in enumerate(parts):
        if k:
            cursor += 2 * style.padding + radius
            center = (cursor, baseline_y - text_h // 2)
            cv2.circle(strip, center, radius, LABEL_TEXT, thickness=cv2.FILLED)
            cursor += radius + 2 * style.padding
        text = part.encode("ascii", "replace").decode("ascii")
        put_text(strip, text, (cursor, baseline_y), style)
        (text_w, _), _ = text_size(text, style)
        cursor += text_w
        if cursor >= width:
            break
    canvas[y : y + height, x : x + width] = strip


def _side_by_side(panels: list[RGBImage], gap: int) -> RGBImage:
    height = max(p.shape[0] for p in panels)
    width = sum(p.shape[1] for p in panels) + gap * (len(panels) - 1)
    out = np.full((height, width, 3), BACKGROUND, dtype=np.uint8)
    x = 0
    for panel in panels:
        out[: panel.shape[0], x : x + panel.shape[1]] = panel
        x += panel.shape[1] + gap
    return out


def _numbers(tracks: Tracks | None, numbers: Sequence[int] | None) -> list[int]:
    count = 0 if tracks is None else len(tracks)
    if numbers is None:
        return list(range(1, count + 1))
    shown = [int(n) for n in numbers]
    if len(shown) != count:
        raise ValueError(f"numbers must name each of the {count} tracks, got {len(shown)}")
    if any(n < 1 for n in shown):
        raise ValueError(f"track numbers start at 1, got {shown}")
    return shown


def check_tracks(video: VideoSource, tracks: Tracks | None) -> None:
    if tracks is None:
        return
    if tracks.size != video.size:
        raise ValueError(f"the tracks' masks are {tracks.size}, the video's frames {video.size}")
    if tracks.frame_count != video.frame_count:
        raise ValueError(
            f"the tracks cover {tracks.frame_count} frames, the video uses {video.frame_count}"
        )
