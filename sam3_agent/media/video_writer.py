"""The result's video: the overlay MP4 (H.264, which browsers, QuickTime and phones play) of a
session's tracks, written a frame at a time; a file appears only when complete."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Final

import cv2
import numpy as np

from sam3_agent.media.render import LEGEND_QUERY_CHARS, score_legend
from sam3_agent.media.video import VideoSource
from sam3_agent.media.video_render import check_tracks, draw_tracks
from sam3_agent.values.files import atomic_output
from sam3_agent.values.text import one_line
from sam3_agent.values.tracks import Tracks

DEFAULT_FPS = 10.0  # of an overlay video whose source declares none (a frame folder)
CODEC: Final = "libx264"  # H.264, which PyAV's wheels ship


def write_overlay_video(
    video: VideoSource, tracks: Tracks, path: Path, *, query: str | None = None
) -> Path:
    """Every frame the session uses with ``tracks`` drawn (and a legend of ``query``), as an
    H.264 MP4 lasting as long as the clip (the frame rate divided by the mean step between frames);
    odd sides padded by one black pixel (the codecs need even sizes)."""
    check_tracks(video, tracks)
    height, width = video.size
    even_w, even_h = width + width % 2, height + height % 2
    numbers = list(range(1, len(tracks) + 1))
    shown_query = None if query is None else one_line(query, LEGEND_QUERY_CHARS)
    scores = [t.score for t in tracks]

    def frames() -> Iterator[np.ndarray]:
        for frame in video.frames():
            canvas = np.array(frame.pixels, dtype=np.uint8, copy=True, order="C")
            draw_tracks(canvas, tracks, frame.position, numbers)
            if shown_query is not None:
                canvas = score_legend(canvas, shown_query, scores)
            pad_y, pad_x = even_h - height, even_w - width
            yield cv2.copyMakeBorder(canvas, 0, pad_y, 0, pad_x, cv2.BORDER_CONSTANT, value=0)

    return _write(path, _overlay_fps(video), frames())


def _overlay_fps(video: VideoSource) -> float:
    fps = video.fps or DEFAULT_FPS
    indices = video.indices
    if len(indices) < 2:
        return fps
    step = (indices[-1] - indices[0]) / (len(indices) - 1)
    return fps / max(1.0, step)


def _write(path: Path, fps: float, frames: Iterator[np.ndarray]) -> Path:
    """``frames`` (RGB, even sides) written to ``path`` as H.264 (yuv420p, the index first so
    a browser plays it while it loads); the file appears only when complete."""
    import av

    rate = Fraction(fps).limit_denominator(1001)
    with (
        atomic_output(path, suffix=".mp4") as tmp,
        av.open(str(tmp), "w", format="mp4", options={"movflags": "+faststart"}) as out,
    ):
        stream = None
        for pixels in frames:
            if stream is None:
                try:
                    stream = out.add_stream(CODEC, rate=rate)
                except ValueError as e:  # an FFmpeg built without the encoder
                    raise OSError(f"PyAV cannot write an MP4 video here: no {CODEC}") from e
                stream.height, stream.width = pixels.shape[:2]
                stream.pix_fmt = "yuv420p"
            out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        if stream is not None:
            out.mux(stream.encode(None))
    return path
