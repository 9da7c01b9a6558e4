"""The result's videos: the overlay MP4 of a session's tracks and the WebM a web page plays,
written a frame at a time; a file appears only when complete."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np

from sam3_agent.media.drawing import resize_image
from sam3_agent.media.render import LEGEND_QUERY_CHARS, score_legend
from sam3_agent.media.video import VideoSource, open_video
from sam3_agent.media.video_render import check_tracks, draw_tracks
from sam3_agent.values.files import atomic_output
from sam3_agent.values.text import one_line
from sam3_agent.values.tracks import Tracks

DEFAULT_FPS = 10.0  # of an overlay video whose source declares none (a frame folder)
# Codecs tried in order. MP4: H.264 plays in browsers, MPEG-4 part 2 is what OpenCV's own
# wheels can always write. WebM: VP8 encodes several times faster than VP9 with OpenCV's
# bundled FFmpeg, and every browser plays both.
FOURCCS = ("avc1", "mp4v")
WEB_FOURCCS = ("VP80", "VP90")
WEB_MAX_SIDE = 854  # longer side of a web page's copy of a video by default (480p's width)
MIN_WEB_SIDE = 16  # its shortest side (VP8 writes no readable frame of 6x4)


def write_overlay_video(
    video: VideoSource, tracks: Tracks, path: Path, *, query: str | None = None
) -> Path:
    """Every frame the session uses with ``tracks`` drawn (and a legend of ``query``), as an MP4
    lasting as long as the clip (the frame rate divided by the mean step between frames);
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

    return _write(path, ".mp4", _overlay_fps(video), (even_w, even_h), frames(), FOURCCS, "an MP4")


def write_web_video(source: Path, path: Path, *, max_side: int = WEB_MAX_SIDE) -> Path:
    """The video at ``source`` as WebM at ``path``, its longer side at most ``max_side`` (sides
    even, at least :data:`MIN_WEB_SIDE`). OpenCV's one stderr line that the WebM muxer does not
    know the codec's tag is harmless."""
    if max_side < MIN_WEB_SIDE:
        raise ValueError(f"max_side must be >= {MIN_WEB_SIDE}, got {max_side}")
    video = open_video(source)
    height, width = video.size
    scale = min(1.0, max_side / max(height, width))
    out_w, out_h = (max(MIN_WEB_SIDE, round(side * scale) // 2 * 2) for side in (width, height))
    frames = (resize_image(f.pixels, height=out_h, width=out_w) for f in video.frames())
    return _write(
        path, ".webm", video.fps or DEFAULT_FPS, (out_w, out_h), frames, WEB_FOURCCS, "a WebM"
    )


def _overlay_fps(video: VideoSource) -> float:
    fps = video.fps or DEFAULT_FPS
    indices = video.indices
    if len(indices) < 2:
        return fps
    step = (indices[-1] - indices[0]) / (len(indices) - 1)
    return fps / max(1.0, step)


def _write(
    path: Path,
    suffix: str,
    fps: float,
    size: tuple[int, int],
    frames: Iterator[np.ndarray],
    tried: Sequence[str],
    kind: str,
) -> Path:
    """``frames`` (RGB, ``size`` ``(width, height)``) written to ``path`` with the first of
    ``tried`` this OpenCV can open; the file appears only when complete."""
    with atomic_output(path, suffix=suffix) as tmp:
        for fourcc in tried:
            with _quiet_opencv():
                writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*fourcc), fps, size)
            if writer.isOpened():
                break
            writer.release()
        else:
            raise OSError(f"OpenCV cannot write {kind} video here (tried {', '.join(tried)})")
        try:
            for pixels in frames:
                writer.write(cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
    return path


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
