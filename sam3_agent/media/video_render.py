"""Grid images of a clip's frames with mask tracks: the sheets and track checks the MLLM
sees, and the result's contact sheet. Track ``n`` is drawn in ``mask_color(n - 1)``; cells
are captioned with the frame's *source* index (as ``frames_used`` counts)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent.media import drawing
from sam3_agent.media.drawing import Color, Placed, Style
from sam3_agent.media.render import LEGEND_QUERY_CHARS, ZOOM_GAP, Renderer, side_by_side
from sam3_agent.media.video import Frame, VideoSource
from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.images import RGBImage
from sam3_agent.values.rle import decode_rle
from sam3_agent.values.text import one_line
from sam3_agent.values.tracks import Track, Tracks

BACKGROUND: Color = (255, 255, 255)  # between cells, as between the halves of a zoom render


def render_sheet(
    video: VideoSource,
    positions: Sequence[int],
    tracks: Tracks | None,
    *,
    max_side: int,
    numbers: Sequence[int] | None = None,
    kept: Tracks | None = None,
) -> RGBImage:
    """One image of the frames at ``positions`` (each once, in order), each cell captioned
    ``frame <index> · <time> s`` with the tracks there drawn and labelled with ``numbers``
    (default ``1..N``), over the ``kept`` tracks drawn apart; ``max(h, w) <= max_side``."""
    chosen = _chosen(positions, "a sheet")
    shown = _numbers(tracks, numbers)
    check_tracks(video, tracks)
    grid = sheet_grid(len(chosen), video.size, max_side)
    return _compose(video, chosen, tracks, shown, grid, kept)


def render_track_check(
    video: VideoSource, track: Track, positions: Sequence[int], *, max_side: int, number: int
) -> RGBImage:
    """What an isolated check of one track sees: per frame at ``positions`` a captioned cell
    with the whole frame, the track drawn in ``mask_color(number - 1)``, and the image
    checker's close-up (:meth:`Renderer.zoom`) beside it; where the track is absent, the frame
    alone, its caption saying so; ``max(h, w) <= max_side``."""
    chosen = _chosen(positions, "a track check")
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
    context_h, slot_w = grid.cell
    context_w = max(1, math.floor(width * context_h / height))
    sheet = np.full((*grid.size, 3), BACKGROUND, dtype=np.uint8)
    color = drawing.mask_color(number - 1)
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
        cell = side_by_side([drawing.resize_image(p, height=context_h) for p in panels], ZOOM_GAP)
        if cell.shape[1] > slot_w:
            cell = drawing.resize_image(cell, width=slot_w)
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
    """The result's sheet: ``count`` frames by :func:`sample_positions` (or ``positions``),
    ``columns`` to a row, each at most ``cell_side`` pixels a side (never enlarged), tracks
    drawn as on :func:`render_sheet`; ``query`` on a header line."""
    if columns < 1 or cell_side < 1:
        raise ValueError(f"columns and cell_side must be positive, got {columns}, {cell_side}")
    check_tracks(video, tracks)
    if positions is None:
        positions = sample_positions(tracks, video.frame_count, count)
    chosen = _chosen(positions, "a contact sheet")
    height, width = video.size
    scale = min(1.0, cell_side / max(height, width))
    cell = (max(1, math.floor(height * scale)), max(1, math.floor(width * scale)))
    style = Style.for_side(max(cell))
    caption, gap = caption_height(style), 2 * style.padding
    columns = min(columns, len(chosen))
    rows = math.ceil(len(chosen) / columns)
    top = 0 if query is None else caption + gap
    grid = SheetGrid(len(chosen), columns, rows, cell, caption, gap, top)
    sheet = _compose(video, chosen, tracks, _numbers(tracks, None), grid)
    if query is not None:
        line = f"query: {one_line(query, LEGEND_QUERY_CHARS)}"
        _paste_caption(sheet, 0, 0, grid.size[1], caption, [line], style)
    return sheet


def _chosen(positions: Sequence[int], what: str) -> list[int]:
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError(f"{what} needs at least one frame position")
    return chosen


def _compose(
    video: VideoSource,
    positions: list[int],
    tracks: Tracks | None,
    numbers: list[int],
    grid: SheetGrid,
    kept: Tracks | None = None,
) -> RGBImage:
    style = grid.style
    sheet = np.full((*grid.size, 3), BACKGROUND, dtype=np.uint8)
    cell_h, cell_w = grid.cell
    for i, frame in enumerate(video.frames(positions)):
        cell = drawing.resize_image(frame.pixels, height=cell_h, width=cell_w)
        if cell is frame.pixels:
            cell = cell.copy()
        if kept is not None:
            draw_tracks(cell, kept, frame.position, list(range(1, len(kept) + 1)), kept=True)
        if tracks is not None:
            draw_tracks(cell, tracks, frame.position, numbers)
        x, y = grid.frame_origin(i)
        sheet[y : y + cell_h, x : x + cell_w] = cell
        caption = _frame_caption(frame)
        _paste_caption(sheet, x, y - grid.caption, cell_w, grid.caption, caption, style)
    return sheet


def draw_tracks(
    canvas: RGBImage, tracks: Tracks, position: int, numbers: list[int], *, kept: bool = False
) -> None:
    """The tracks present at ``position`` drawn on ``canvas`` (the frame at any size) as on
    image renders, each labelled with its number in ``numbers`` (``kept``: drawn apart, as
    kept tracks); in place."""
    canvas_h, canvas_w = canvas.shape[:2]
    sx, sy = canvas_w / tracks.size[1], canvas_h / tracks.size[0]
    placed: list[Placed] = []
    shown: list[int] = []
    for track, number in zip(tracks, numbers, strict=True):
        if (rle := track.masks.get(position)) is None:
            continue
        mask = decode_rle(rle)
        box = _box_of(track, position, mask).tolist()
        one = drawing.downscale_mask(mask, box, sx, sy, canvas_w, canvas_h)
        if one.crop.size and one.crop.any():
            placed.append(one)
            shown.append(number)
    drawing.draw_numbered(canvas, placed, shown, kept=kept)


def _box_of(track: Track, position: int, mask: np.ndarray) -> np.ndarray:
    """The mask's tight integer XYXY box (exclusive ends): the track's own clipped to the
    frame, else computed from the mask."""
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
    """A dark strip at ``(x, y)`` with ``parts`` in white between drawn middle dots (OpenCV's
    font is ASCII: other characters show as ``?``), cut at the strip's edge."""
    strip = np.empty((height, width, 3), dtype=np.uint8)
    strip[:] = drawing.LABEL_BACKGROUND
    (_, text_h), _ = drawing.text_size("Ag0", style)
    baseline_y = style.padding + text_h
    radius = max(1, round(2 * style.font_scale))
    cursor = style.padding
    for k, part in enumerate(parts):
        if k:
            cursor += 2 * style.padding + radius
            center = (cursor, baseline_y - text_h // 2)
            cv2.circle(strip, center, radius, drawing.LABEL_TEXT, thickness=cv2.FILLED)
            cursor += radius + 2 * style.padding
        text = part.encode("ascii", "replace").decode("ascii")
        drawing.put_text(strip, text, (cursor, baseline_y), style)
        (text_w, _), _ = drawing.text_size(text, style)
        cursor += text_w
        if cursor >= width:
            break
    canvas[y : y + height, x : x + width] = strip


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


def sample_positions(
    tracks: Tracks | None, frame_count: int, count: int, *, within: tuple[int, int] | None = None
) -> list[int]:
    """At most ``count`` frame positions (0-based, increasing) spread evenly by rank over the
    positions where some track is (every position when none is), within the inclusive range
    ``within`` when given; the first and last included (with 1: the middle one)."""
    if frame_count < 1:
        raise ValueError(f"frame_count must be at least 1, got {frame_count}")
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    lo, hi = 0, frame_count - 1
    if within is not None:
        first, last = within
        if first > last:
            raise ValueError(f"within must be (first, last) with first <= last, got {within}")
        lo, hi = max(lo, first), min(hi, last)
        if lo > hi:
            raise ValueError(f"frames {first}..{last} are outside the clip's 0..{frame_count - 1}")
    present = [p for p in (tracks.positions() if tracks else []) if lo <= p <= hi]
    candidates: Sequence[int] = present or range(lo, hi + 1)
    n = len(candidates)
    if n <= count:
        return list(candidates)
    if count == 1:
        return [candidates[(n - 1) // 2]]
    # round(i * (n - 1) / (count - 1)) in integers: steps over 1 apart round to distinct ranks.
    span = count - 1
    return [candidates[(2 * i * (n - 1) + span) // (2 * span)] for i in range(count)]


@dataclass(frozen=True)
class SheetGrid:
    """``columns`` x ``rows`` cells filled row by row, each a ``caption`` strip over a frame of
    ``cell`` ``(height, width)``, ``gap`` apart, under a header ``top`` high (0: none)."""

    count: int
    columns: int
    rows: int
    cell: tuple[int, int]
    caption: int
    gap: int
    top: int = 0

    @property
    def size(self) -> tuple[int, int]:
        h, w = self.cell
        return (
            self.top + self.rows * (self.caption + h) + (self.rows - 1) * self.gap,
            self.columns * w + (self.columns - 1) * self.gap,
        )

    @property
    def style(self) -> Style:
        return Style.for_side(max(self.cell))

    def frame_origin(self, i: int) -> tuple[int, int]:
        """``(x, y)`` of the top-left pixel of the ``i``-th (0-based) cell's frame."""
        if not 0 <= i < self.count:
            raise IndexError(f"cell must be in [0, {self.count - 1}], got {i}")
        h, w = self.cell
        row, column = divmod(i, self.columns)
        y = self.top + row * (self.caption + h + self.gap) + self.caption
        return column * (w + self.gap), y


def sheet_grid(count: int, frame_size: tuple[int, int], max_side: int) -> SheetGrid:
    """The grid showing ``count`` frames of ``frame_size`` ``(height, width)`` largest within
    ``max_side`` a side (never enlarged); among equal cells, fewest empty ones, then squarest."""
    if count < 1:
        raise ValueError(f"a sheet shows at least one frame, got {count}")
    smallest = Style.for_side(1)
    grid = _best_grid(count, frame_size, max_side, smallest)
    if grid.style != smallest:  # cells over 1024 px: larger captions, a little less room
        grid = _best_grid(count, frame_size, max_side, grid.style)
    return grid


def _best_grid(count: int, frame_size: tuple[int, int], max_side: int, style: Style) -> SheetGrid:
    caption, gap = caption_height(style), 2 * style.padding
    height, width = frame_size
    best: tuple[tuple[int, int, float], SheetGrid] | None = None
    for columns in range(1, count + 1):
        rows = math.ceil(count / columns)
        room_w = max_side - (columns - 1) * gap
        room_h = max_side - (rows - 1) * gap - rows * caption
        scale = min(1.0, room_w / (columns * width), room_h / (rows * height))
        # A sliver of a frame keeps one pixel across, where there is room for it.
        cell = (max(1, math.floor(height * scale)), max(1, math.floor(width * scale)))
        if rows * cell[0] > room_h or columns * cell[1] > room_w:
            continue
        grid = SheetGrid(count, columns, rows, cell, caption, gap)
        sheet_h, sheet_w = grid.size
        key = (-(cell[0] * cell[1]), columns * rows - count, abs(math.log(sheet_w / sheet_h)))
        if best is None or key < best[0]:
            best = (key, grid)
    if best is None:
        raise ValueError(f"max_side {max_side} is too small to show {count} frames of {frame_size}")
    return best[1]


def caption_height(style: Style) -> int:
    (_, text_h), baseline = drawing.text_size("Ag0", style)
    return text_h + baseline + 2 * style.padding
