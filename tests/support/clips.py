"""Synthetic video clips for tests: coloured squares moving over a plain background.

PyAV writes them as MP4 (MPEG-4 part 2) files or as folders of JPEG frames (the layout DAVIS and
YouTube-VOS ship). Each clip comes with its ground truth: every square's box per frame, so
tests can check masks and tracks against where the shapes really are.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

BACKGROUND = (40, 40, 40)


@dataclass(frozen=True)
class Square:
    """A square of side ``side`` whose top-left corner moves by ``velocity`` px per frame.

    ``first``/``last``: the frames it is visible in (inclusive); None: every frame.
    """

    color: tuple[int, int, int]  # RGB
    start: tuple[int, int]  # (x, y) at frame 0
    velocity: tuple[int, int]
    side: int = 16
    first: int | None = None
    last: int | None = None

    def box(self, frame: int) -> tuple[int, int, int, int] | None:
        """XYXY (exclusive) at a frame, None when not visible."""
        if (self.first is not None and frame < self.first) or (
            self.last is not None and frame > self.last
        ):
            return None
        x = self.start[0] + self.velocity[0] * frame
        y = self.start[1] + self.velocity[1] * frame
        return x, y, x + self.side, y + self.side


LEFT_AND_RIGHT = (
    Square((230, 40, 40), (80, 24), (-3, 0)),  # red, moves left
    Square((40, 200, 60), (16, 64), (3, 0)),  # green, moves right
)


def render_frame(squares: tuple[Square, ...], frame: int, size: tuple[int, int]) -> np.ndarray:
    """One RGB frame ``(H, W, 3)``."""
    h, w = size
    pixels = np.empty((h, w, 3), dtype=np.uint8)
    pixels[:] = BACKGROUND
    for square in squares:
        box = square.box(frame)
        if box is not None:
            x0, y0, x1, y1 = (int(v) for v in box)
            pixels[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = square.color
    return pixels


def square_mask(square: Square, frame: int, size: tuple[int, int]) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    box = square.box(frame)
    if box is not None:
        x0, y0, x1, y1 = box
        mask[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = True
    return mask


def write_mp4(
    path: Path,
    frames: int = 12,
    *,
    squares: tuple[Square, ...] = LEFT_AND_RIGHT,
    size: tuple[int, int] = (96, 128),
    fps: float = 10.0,
    fourcc: str = "mpeg4",
    times: tuple[float, ...] | None = None,
    rotation: int = 0,
) -> Path:
    """A video of ``frames`` frames written with PyAV (MPEG-4 part 2 in MP4 by default;
    ``fourcc="MJPG"`` with an ``.avi`` path gives a file whose every frame stands alone).
    ``times`` (seconds, increasing) gives a variable frame rate; ``rotation`` (degrees
    counter-clockwise, the display matrix) says how a player turns the stored frames, which are
    the upright frames turned the other way, as a phone records them; returns ``path``."""
    import av

    codec = {"MJPG": "mjpeg", "mp4v": "mpeg4"}.get(fourcc, fourcc)
    rate = Fraction(fps).limit_denominator(1001)
    tick = Fraction(1, 1000) if times is not None else 1 / rate
    pts = [round(t / tick) for t in times] if times is not None else list(range(frames))
    turns = -rotation // 90
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=rate)
        stream.codec_context.time_base = stream.time_base = tick
        stream.height, stream.width = np.rot90(np.zeros(size), turns).shape
        stream.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        if rotation:
            stream.set_display_rotation(rotation)
        for i, p in enumerate(pts):
            pixels = np.ascontiguousarray(np.rot90(render_frame(squares, i, size), turns))
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts, frame.time_base = p, tick
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def write_frames(
    folder: Path,
    frames: int = 12,
    *,
    squares: tuple[Square, ...] = LEFT_AND_RIGHT,
    size: tuple[int, int] = (96, 128),
    suffix: str = ".jpg",
) -> Path:
    """A folder of ``00000.jpg, 00001.jpg, ...`` frames; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(frames):
        bgr = cv2.cvtColor(render_frame(squares, i, size), cv2.COLOR_RGB2BGR)
        cv2.imwrite(str(folder / f"{i:05d}{suffix}"), bgr)
    return folder
