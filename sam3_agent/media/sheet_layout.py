"""Which frames of a clip a call shows, and where they go on a sheet: positions and grid
geometry only (the drawing is :mod:`~sam3_agent.media.video_render`'s)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sam3_agent.media.drawing import Style, text_size
from sam3_agent.values.tracks import Tracks


def sample_positions(
    tracks: Tracks | None,
    frame_count: int,
    count: int,
    *,
    within: tuple[int, int] | None = None,
) -> list[int]:
    """At most ``count`` frame positions (0-based, increasing) to show in one call, spread
    evenly by rank over the positions where some track is present (every position when
    none is). ``within``: only this inclusive range (an Uncertain verdict's). With
    ``count >= 2`` the first and last candidates are included; with 1, the middle one."""
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
    """The grid showing ``count`` frames of ``frame_size`` ``(height, width)`` largest
    within ``max_side`` pixels a side (frames are never enlarged); among equal cell sizes,
    the one with fewest empty cells, then the squarest."""
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
    caption, gap = caption_height(style), gap_for(style)
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
    (_, text_h), baseline = text_size("Ag0", style)
    return text_h + baseline + 2 * style.padding


def gap_for(style: Style) -> int:
    return 2 * style.padding
