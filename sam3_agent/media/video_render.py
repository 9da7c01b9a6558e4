"""Images and videos of mask tracks: what the MLLM sees of a clip, and the result's files.

* :func:`sample_positions` picks the few frames a call shows, spread over the frames where
  candidate tracks exist (or a narrower range after an Uncertain verdict).
* :func:`render_sheet` puts those frames in one grid image, each cell captioned with its
  frame index and time, every track drawn with its colour and 1-based number.
* :func:`render_track_check` shows one track alone over a few frames: each cell the whole
  frame with the mask drawn and the close-up the image checker shows
  (:meth:`~sam3_agent.media.render.Renderer.zoom`).
* :func:`write_overlay_video` writes every used frame with the tracks drawn as an MP4;
  :func:`contact_sheet` is the result's PNG of sampled frames.
* :func:`write_web_video` copies a video as WebM, which browsers play (a web page's copy of
  the overlay: OpenCV's own MP4 codec is one they do not).

Frames are decoded one at a time (:meth:`~sam3_agent.media.video.VideoSource.frames`) and
only the chosen ones, so memory is flat in the clip's length. A track's number and colour
are the same in every cell and every file: number ``n`` is drawn in ``mask_color(n - 1)``,
as on the image renders. Cells are captioned with the frame's *source* index (as datasets,
players and ``result.json``'s ``frames_used`` count), not its position among the frames
used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from sam3_agent.media.drawing import (
    LABEL_BACKGROUND,
    LABEL_TEXT,
    Color,
    Style,
    downscale_mask,
    draw_label,
    fill_mask,
    label_anchor,
    mask_color,
    outline_mask,
)
from sam3_agent.media.render import LEGEND_QUERY_CHARS, ZOOM_GAP, Renderer, score_legend
from sam3_agent.media.video import Frame, VideoSource, open_video
from sam3_agent.values.detections import Detections, tight_boxes
from sam3_agent.values.files import atomic_output
from sam3_agent.values.images import RGBImage
from sam3_agent.values.rle import decode_rle
from sam3_agent.values.text import one_line
from sam3_agent.values.tracks import Track, Tracks

__all__ = [
    "DEFAULT_FPS",
    "SheetGrid",
    "contact_sheet",
    "render_sheet",
    "render_track_check",
    "sample_positions",
    "sheet_grid",
    "write_overlay_video",
    "write_web_video",
]

DEFAULT_FPS = 10.0
"""Frame rate of an overlay video whose source declares none (a frame folder)."""
BACKGROUND: Color = (255, 255, 255)
"""Between cells, as between the halves of a zoom render."""
FOURCCS = ("avc1", "mp4v")
"""Codecs tried for the overlay video, in order: H.264 plays in browsers; MPEG-4 part 2 is
what OpenCV's own wheels can always write."""
WEB_FOURCCS = ("VP80", "VP90")
"""Codecs tried for a WebM video, in order: VP8 encodes several times faster than VP9 with
OpenCV's bundled FFmpeg, and every browser plays both."""
WEB_MAX_SIDE = 854
"""Longer side of a web page's copy of a video, in pixels by default (480p's width)."""
MIN_WEB_SIDE = 16
"""Shortest side of a web page's copy of a video (VP8 writes no readable frame of 6x4)."""
_FONT = cv2.FONT_HERSHEY_SIMPLEX


# -- which frames ----------------------------------------------------------------------------


def sample_positions(
    tracks: Tracks | None,
    frame_count: int,
    count: int,
    *,
    within: tuple[int, int] | None = None,
) -> list[int]:
    """At most ``count`` frame positions (0-based, increasing) to show in one call.

    They are spread evenly (by rank) over the positions where at least one of ``tracks``
    is present, or over every position when no track is present there (or ``tracks`` is
    None or empty). ``within``: only positions in this inclusive range (clipped to the clip),
    to narrow the frames shown after an Uncertain verdict. With ``count >= 2`` the first and
    last of those positions are always included; with ``count == 1`` the middle one is
    chosen. The same arguments always give the same positions.

    Raises:
        ValueError: ``frame_count`` or ``count`` under 1; ``within`` reversed or wholly
            outside ``0..frame_count - 1``.
    """
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


# -- layout ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SheetGrid:
    """Where the frames of a sheet go: ``columns`` x ``rows`` cells, filled row by row.

    Each cell is a caption strip ``caption`` pixels high over a frame of ``cell``
    ``(height, width)`` pixels; cells are ``gap`` pixels apart, under a header ``top``
    pixels high (0: none).
    """

    count: int
    columns: int
    rows: int
    cell: tuple[int, int]
    caption: int
    gap: int
    top: int = 0

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` of the whole sheet."""
        h, w = self.cell
        return (
            self.top + self.rows * (self.caption + h) + (self.rows - 1) * self.gap,
            self.columns * w + (self.columns - 1) * self.gap,
        )

    @property
    def style(self) -> Style:
        """Text and line sizes for the cells (as for an image of a cell's size)."""
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
    """The grid showing ``count`` frames of ``frame_size`` ``(height, width)`` largest
    within ``max_side`` pixels a side (frames are never enlarged); among equal cell sizes,
    the one with fewest empty cells, then the squarest. Captions and gaps are sized for the
    cells (:meth:`SheetGrid.style`), as labels are on an image of that size.

    Raises:
        ValueError: ``max_side`` leaves no pixel for a frame.
    """
    if count < 1:
        raise ValueError(f"a sheet shows at least one frame, got {count}")
    smallest = Style.for_side(1)
    grid = _best_grid(count, frame_size, max_side, smallest)
    if grid.style != smallest:
        # Cells over 1024 px: larger text, so a little less room for the frames (whose
        # style is then at most the one the captions were sized for).
        grid = _best_grid(count, frame_size, max_side, grid.style)
    return grid


def _best_grid(count: int, frame_size: tuple[int, int], max_side: int, style: Style) -> SheetGrid:
    caption, gap = _caption_height(style), _gap(style)
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


# -- the renders -----------------------------------------------------------------------------


def render_sheet(
    video: VideoSource,
    positions: Sequence[int],
    tracks: Tracks | None,
    *,
    max_side: int,
    numbers: Sequence[int] | None = None,
) -> RGBImage:
    """One image of the frames at ``positions`` (cells in increasing position order, a
    repeated position shown once), each cell captioned ``frame <index> · <time> s`` and
    with every track of ``tracks`` present there filled, outlined and labelled with its
    number inside its mask (a track absent from a frame is not drawn in its cell).

    ``numbers``: the number shown for each track (default ``1..N``); a track numbered ``n``
    is drawn in ``mask_color(n - 1)`` in every cell. Only the chosen frames are decoded, one
    at a time. Returns ``(h, w, 3)`` uint8 RGB with ``max(h, w) <= max_side``.

    Raises:
        ValueError: no positions; ``tracks`` not of this video; ``numbers`` not one
            positive number per track; ``max_side`` too small for the cells.
    """
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError("a sheet needs at least one frame position")
    shown = _numbers(tracks, numbers)
    _check_tracks(video, tracks)
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
    """What an isolated check of one track sees: for each frame at ``positions`` (increasing,
    repeats once) a cell captioned with its frame index and time, holding the whole frame
    with the track's mask drawn and, beside it, the close-up of the image checker
    (:meth:`~sam3_agent.media.render.Renderer.zoom`: the crop around the mask's box, plain
    and with the mask drawn). A frame where the track is absent shows the whole frame alone,
    its caption saying so. The track is drawn in ``mask_color(number - 1)``, its colour on
    the sheets; no other track is drawn.

    Returns ``(h, w, 3)`` uint8 RGB with ``max(h, w) <= max_side``.

    Raises:
        ValueError: no positions, ``number`` under 1, a mask not of this video's size,
            ``max_side`` too small.
    """
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
        cell = _side_by_side([_resize(p, height=context_h) for p in panels], ZOOM_GAP)
        if cell.shape[1] > slot_w:
            cell = _resize(cell, width=slot_w)
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
    """The result's sheet of sampled frames (the caller writes it as PNG): ``count`` frames
    chosen by :func:`sample_positions` (or ``positions``), ``columns`` to a row, each at
    most ``cell_side`` pixels on its longer side (never enlarged), tracks drawn as on
    :func:`render_sheet` (numbered ``1..N``). ``query``: shown on a header line, as one
    bounded line of text.

    Returns ``(h, w, 3)`` uint8 RGB, at most ``columns * cell_side`` plus gaps wide.
    """
    if columns < 1 or cell_side < 1:
        raise ValueError(f"columns and cell_side must be positive, got {columns}, {cell_side}")
    _check_tracks(video, tracks)
    if positions is None:
        positions = sample_positions(tracks, video.frame_count, count)
    chosen = sorted(set(positions))
    if not chosen:
        raise ValueError("a contact sheet needs at least one frame position")
    height, width = video.size
    scale = min(1.0, cell_side / max(height, width))
    cell = (max(1, math.floor(height * scale)), max(1, math.floor(width * scale)))
    style = Style.for_side(max(cell))
    caption = _caption_height(style)
    columns = min(columns, len(chosen))
    grid = SheetGrid(
        count=len(chosen),
        columns=columns,
        rows=math.ceil(len(chosen) / columns),
        cell=cell,
        caption=caption,
        gap=_gap(style),
        top=0 if query is None else caption + _gap(style),
    )
    sheet = _compose(video, chosen, tracks, _numbers(tracks, None), grid)
    if query is not None:
        line = f"query: {one_line(query, LEGEND_QUERY_CHARS)}"
        _paste_caption(sheet, 0, 0, grid.size[1], caption, [line], style)
    return sheet


def write_overlay_video(
    video: VideoSource, tracks: Tracks, path: Path, *, query: str | None = None
) -> Path:
    """Write every frame the session uses, with ``tracks`` drawn (colour, outline, number
    ``1..N``), as an MP4 at ``path``; returns ``path``.

    The frame rate is the video's (:data:`DEFAULT_FPS` when it declares none) divided by the
    mean step between the frames used, so the overlay lasts as long as the clip. H.264 is
    tried first (browsers play it), MPEG-4 part 2 otherwise. A frame of odd width or height
    is padded by one black pixel on the right or bottom (the codecs need even sizes).
    ``query``: a legend in the top-left corner (:func:`~sam3_agent.media.render.legend`:
    the query as one bounded line, then each track's number and score). Frames are decoded,
    drawn and written one at a time; the file appears only when complete (temp file, then
    rename).

    Raises:
        ValueError: ``tracks`` not of this video.
        OSError: no codec could be opened for writing.
        VideoLoadError: a frame can no longer be read (``path`` is then left as it was).
    """
    _check_tracks(video, tracks)
    height, width = video.size
    even_w, even_h = width + width % 2, height + height % 2
    numbers = list(range(1, len(tracks) + 1))
    shown_query = None if query is None else one_line(query, LEGEND_QUERY_CHARS)
    scores = [t.score for t in tracks]
    style = Style.for_side(max(height, width))
    with atomic_output(path, suffix=".mp4") as tmp:
        writer = _open_writer(tmp, _overlay_fps(video), (even_w, even_h))
        try:
            for frame in video.frames():
                canvas = np.array(frame.pixels, dtype=np.uint8, copy=True, order="C")
                _draw_tracks(canvas, tracks, frame.position, numbers, style)
                if shown_query is not None:
                    canvas = score_legend(canvas, shown_query, scores)
                bgr = cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR)
                if (even_w, even_h) != (width, height):
                    bgr = cv2.copyMakeBorder(
                        bgr, 0, even_h - height, 0, even_w - width, cv2.BORDER_CONSTANT, value=0
                    )
                writer.write(bgr)
        finally:
            writer.release()
    return path


def write_web_video(source: Path, path: Path, *, max_side: int = WEB_MAX_SIDE) -> Path:
    """Copy the video at ``source`` (an overlay :func:`write_overlay_video` wrote) to ``path``
    as WebM, which browsers play; returns ``path``.

    VP8 (VP9 where VP8 is missing), at ``source``'s frame rate (:data:`DEFAULT_FPS` when it
    declares none), shrunk so that its longer side is at most ``max_side`` (sides kept even
    and at least :data:`MIN_WEB_SIDE`, as the codecs need). Frames are decoded and written
    one at a time; the file appears only when complete (temp file, then rename). OpenCV
    says once on stderr that the WebM muxer does not know the codec's tag; it writes the
    file all the same.

    Raises:
        ValueError: ``max_side`` under :data:`MIN_WEB_SIDE`.
        VideoLoadError: ``source`` cannot be read.
        OSError: no WebM codec could be opened for writing.
    """
    if max_side < MIN_WEB_SIDE:
        raise ValueError(f"max_side must be >= {MIN_WEB_SIDE}, got {max_side}")
    video = open_video(source)
    height, width = video.size
    scale = min(1.0, max_side / max(height, width))
    out_w, out_h = (max(MIN_WEB_SIDE, round(side * scale) // 2 * 2) for side in (width, height))
    size = (out_w, out_h)
    with atomic_output(path, suffix=".webm") as tmp:
        writer = _open_writer(tmp, video.fps or DEFAULT_FPS, size, WEB_FOURCCS, "a WebM")
        try:
            for frame in video.frames():
                pixels = _resize(frame.pixels, height=size[1], width=size[0])
                writer.write(cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
    return path


# -- drawing ---------------------------------------------------------------------------------


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
        cell = _resize(frame.pixels, height=cell_h, width=cell_w)
        if cell is frame.pixels:
            cell = cell.copy()
        if tracks is not None:
            _draw_tracks(cell, tracks, frame.position, numbers, style)
        x, y = grid.frame_origin(i)
        sheet[y : y + cell_h, x : x + cell_w] = cell
        caption = _frame_caption(frame)
        _paste_caption(sheet, x, y - grid.caption, cell_w, grid.caption, caption, style)
    return sheet


def _draw_tracks(
    canvas: RGBImage, tracks: Tracks, position: int, numbers: list[int], style: Style
) -> None:
    """The tracks present at ``position`` on ``canvas`` (the frame at any size), in place:
    fills, then outlines, then numbers (so no fill covers a number), as on image renders."""
    canvas_h, canvas_w = canvas.shape[:2]
    height, width = tracks.size
    sx, sy = canvas_w / width, canvas_h / height
    drawn = []
    for track, number in zip(tracks, numbers, strict=True):
        rle = track.masks.get(position)
        if rle is None:
            continue
        mask = decode_rle(rle)
        box = _box_of(track, position, mask)
        placed = downscale_mask(mask, box.tolist(), sx, sy, canvas_w, canvas_h)
        if placed.crop.size and placed.crop.any():
            drawn.append((placed, mask_color(number - 1), str(number)))
    for placed, color, _ in drawn:
        fill_mask(canvas, placed, color)
    for placed, color, _ in drawn:
        outline_mask(canvas, placed, color, style.line)
    for placed, color, text in drawn:
        draw_label(canvas, text, label_anchor(placed), color, style)


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


def _caption_height(style: Style) -> int:
    (_, text_h), baseline = cv2.getTextSize("Ag0", _FONT, style.font_scale, style.font_thickness)
    return text_h + baseline + 2 * style.padding


def _gap(style: Style) -> int:
    return 2 * style.padding


def _paste_caption(
    canvas: RGBImage, x: int, y: int, width: int, height: int, parts: list[str], style: Style
) -> None:
    """A dark strip at ``(x, y)`` with ``parts`` in white separated by middle dots (drawn:
    OpenCV's font is ASCII, and so is the text, other characters shown as ``?``). Text that
    does not fit the strip is cut at its edge."""
    strip = np.empty((height, width, 3), dtype=np.uint8)
    strip[:] = LABEL_BACKGROUND
    (_, text_h), _ = cv2.getTextSize("Ag0", _FONT, style.font_scale, style.font_thickness)
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
        cv2.putText(
            strip, text, (cursor, baseline_y), _FONT, style.font_scale, LABEL_TEXT,
            style.font_thickness, cv2.LINE_AA,
        )  # fmt: skip
        (text_w, _), _ = cv2.getTextSize(text, _FONT, style.font_scale, style.font_thickness)
        cursor += text_w
        if cursor >= width:
            break
    canvas[y : y + height, x : x + width] = strip


def _resize(image: RGBImage, *, height: int | None = None, width: int | None = None) -> RGBImage:
    """``image`` at ``height`` x ``width`` (either one alone keeps the aspect ratio): area
    averaging when shrinking, bilinear when enlarging; ``image`` itself when unchanged."""
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


def _side_by_side(panels: list[RGBImage], gap: int) -> RGBImage:
    height = max(p.shape[0] for p in panels)
    width = sum(p.shape[1] for p in panels) + gap * (len(panels) - 1)
    out = np.full((height, width, 3), BACKGROUND, dtype=np.uint8)
    x = 0
    for panel in panels:
        out[: panel.shape[0], x : x + panel.shape[1]] = panel
        x += panel.shape[1] + gap
    return out


# -- checks and the writer -------------------------------------------------------------------


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


def _check_tracks(video: VideoSource, tracks: Tracks | None) -> None:
    if tracks is None:
        return
    if tracks.size != video.size:
        raise ValueError(f"the tracks' masks are {tracks.size}, the video's frames {video.size}")
    if tracks.frame_count != video.frame_count:
        raise ValueError(
            f"the tracks cover {tracks.frame_count} frames, the video uses {video.frame_count}"
        )


def _overlay_fps(video: VideoSource) -> float:
    fps = video.fps or DEFAULT_FPS
    indices = video.indices
    if len(indices) < 2:
        return fps
    step = (indices[-1] - indices[0]) / (len(indices) - 1)
    return fps / max(1.0, step)


def _open_writer(
    path: Path,
    fps: float,
    size: tuple[int, int],
    fourccs: Sequence[str] | None = None,
    kind: str = "an MP4",
) -> cv2.VideoWriter:
    """A writer for ``path`` at ``fps`` and ``size`` ``(width, height)``, with the first of
    ``fourccs`` (:data:`FOURCCS` by default) this OpenCV can open; ``kind`` names the
    format in the error."""
    tried = FOURCCS if fourccs is None else fourccs
    for fourcc in tried:
        with _quiet_opencv():
            writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*fourcc), fps, size)
        if writer.isOpened():
            return writer
        writer.release()
    raise OSError(f"OpenCV cannot write {kind} video here (tried {', '.join(tried)})")


@contextmanager
def _quiet_opencv() -> Iterator[None]:
    # A codec OpenCV's wheel lacks (H.264) is expected: its failure is ours to report, not a
    # screenful of FFmpeg and OpenCV lines on stderr (a user's own FFmpeg setting is kept).
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        cv2.utils.logging.setLogLevel(level)
