"""Videos (a file PyAV's FFmpeg reads, rotation applied; or a folder of same-size frame
images in name order) decoded one frame at a time on demand, so memory is flat in the clip's
length. A truncated file opens with the frames before the damage."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Generator, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from sam3_agent.values.config import DEFAULT_MAX_PIXELS, FrameSelection
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.images import RGBImage, image_size_as_displayed, load_image, refuse_url

if TYPE_CHECKING:
    from av.video.frame import VideoFrame
    from av.video.stream import VideoStream

FRAME_SUFFIXES = (".jpg", ".jpeg", ".png")


class VideoLoadError(ImageLoadError):
    """A video that cannot be read (missing, not a video, corrupt, no frame in range)."""


class VideoTooLargeError(VideoLoadError):
    """Frames over the pixel limit (the SAM 3 service answers 413, as for an image)."""


@dataclass(frozen=True)
class Frame:
    position: int  # among the frames the session uses (0, 1, ...): tracks are keyed by it
    index: int  # in the source video (0-based), as datasets and players count
    time_s: float | None  # seconds from the start, where the frame rate is known
    pixels: RGBImage


@dataclass(frozen=True, eq=False)
class VideoSource:
    """A checked video and the frames a session uses; decode them with :meth:`frames`."""

    path: Path
    kind: Literal["file", "frames"]
    indices: tuple[int, ...]  # source indices of the frames used, increasing
    size: tuple[int, int]  # (height, width) as displayed (rotation applied)
    fps: float | None
    source_frames: int  # frames in the source that could be read (before the selection)
    max_pixels: int
    note: str | None = None  # why fewer frames than declared can be read (a truncated file)
    frame_names: tuple[str, ...] = ()  # a frame folder's file names, one per source frame
    frame_times: tuple[float, ...] = ()  # a file's frame times from its timestamps, where known

    @property
    def frame_count(self) -> int:
        return len(self.indices)

    def time_of(self, index: int) -> float | None:
        if self.frame_times:
            return self.frame_times[index]
        return index / self.fps if self.fps else None

    def frames(self, positions: Iterator[int] | list[int] | None = None) -> Iterator[Frame]:
        """Decode the frames at ``positions`` (all by default) one at a time, in order, reading
        the source again."""
        wanted = list(range(self.frame_count)) if positions is None else sorted(set(positions))
        if not wanted:
            return
        if wanted[0] < 0 or wanted[-1] >= self.frame_count:
            raise UserError(f"frame positions must be in 0..{self.frame_count - 1}")
        if self.kind == "frames":
            yield from self._folder_frames(wanted)
        else:
            yield from self._file_frames(wanted)

    def reselect(self, selection: FrameSelection) -> VideoSource:
        """This video with another frame selection (nothing is decoded)."""
        fps = self.fps if self.kind == "file" else selection.fps
        indices = _select(
            self.source_frames, fps, selection, self.path, self.kind, self.frame_times
        )
        return replace(self, indices=indices, fps=fps)

    def digest(self) -> str:
        """A content hash of the source and the selection (checkpoint fingerprints)."""
        h = hashlib.sha256()
        h.update(repr((self.indices, self.size)).encode())
        files = [self.path / n for n in self.frame_names] if self.kind == "frames" else [self.path]
        for file in files:
            with open(file, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        return h.hexdigest()

    def describe(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "kind": self.kind,
            "size": list(self.size),
            "fps": self.fps,
            "source_frames": self.source_frames,
            "frames_used": list(self.indices),
            "note": self.note,
        }

    def _folder_frames(self, wanted: list[int]) -> Iterator[Frame]:
        for position in wanted:
            index = self.indices[position]
            file = self.path / self.frame_names[index]
            try:
                pixels = load_image(file, max_pixels=self.max_pixels)
            except ImageLoadError as e:
                raise VideoLoadError(f"frame {index} of {self.path}: {e}") from e
            yield Frame(position, index, self.time_of(index), self._checked(pixels, index))

    def _checked(self, pixels: RGBImage, index: int) -> RGBImage:
        # A frame is never resized; a file's stream may still change size midway.
        if pixels.shape[:2] == self.size:
            return pixels
        h, w = pixels.shape[:2]
        raise VideoLoadError(
            f"{self.path}: frame {index} is {w}x{h}, the first frame used "
            f"{self.size[1]}x{self.size[0]}; the frames of a video share one size"
        )

    def _file_frames(self, wanted: list[int]) -> Iterator[Frame]:
        targets = iter(wanted)
        position = next(targets)
        with closing(_decoded(self.path)) as decoded:  # the file closes when we stop early
            for index, (frame, _) in enumerate(decoded):
                if index == self.indices[position]:
                    pixels = self._checked(_to_rgb(frame), index)
                    yield Frame(position, index, self.time_of(index), pixels)
                    position = next(targets, -1)
                    if position < 0:
                        return
        raise VideoLoadError(f"{self.path}: frame {self.indices[position]} can no longer be read")


def open_video(
    video: str | Path,
    selection: FrameSelection | None = None,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> VideoSource:
    """Check ``video`` and index the frames a session uses, decoding only a file's first used
    frame (its displayed size) and a folder's headers."""
    selection = selection or FrameSelection()
    refuse_url(video, "videos", VideoLoadError)
    path = Path(video)
    if not path.exists():
        raise VideoLoadError(f"video not found: {path}")
    if path.is_dir():
        return _open_folder(path, selection, max_pixels)
    if not path.is_file():
        raise VideoLoadError(f"not a file or a folder of frames: {path}")
    return _open_file(path, selection, max_pixels)


def _open_folder(path: Path, selection: FrameSelection, max_pixels: int) -> VideoSource:
    names = tuple(
        sorted(p.name for p in path.iterdir() if p.suffix.lower() in FRAME_SUFFIXES and p.is_file())
    )
    if not names:
        raise VideoLoadError(f"{path} holds no frame images ({', '.join(FRAME_SUFFIXES)})")
    indices = _select(len(names), selection.fps, selection, path, "frames")
    height, width = _folder_frame_size(path, names, max_pixels)
    return VideoSource(
        path, "frames", indices, (height, width), selection.fps, len(names), max_pixels,
        frame_names=names,
    )  # fmt: skip


def _folder_frame_size(path: Path, names: tuple[str, ...], max_pixels: int) -> tuple[int, int]:
    def size_of(index: int) -> tuple[int, int]:
        try:
            return image_size_as_displayed(path / names[index])
        except ImageLoadError as e:
            raise VideoLoadError(f"frame {index} of {path}: {e}") from e

    height, width = size_of(0)
    _check_pixels(width, height, max_pixels, path)
    for index in range(1, len(names)):
        h, w = size_of(index)
        if (h, w) != (height, width):
            raise VideoLoadError(
                f"{path}: frame {names[index]} is {w}x{h}, the first frame ({names[0]}) "
                f"{width}x{height}; the frames of a video share one size: resize them first"
            )
    return height, width


def _open_file(path: Path, selection: FrameSelection, max_pixels: int) -> VideoSource:
    times: list[float | None] = []
    declared, fps, first = 0, None, None
    for frame, stream in _decoded(path):
        if first is None:
            declared, fps = stream.frames, stream.average_rate
            _check_pixels(frame.width, frame.height, max_pixels, path)
            first = frame
        times.append(None if frame.pts is None else float(frame.time or 0.0))
    if first is None:
        raise VideoLoadError(f"cannot read video {path}: no frame could be decoded")
    rate = float(fps) if fps else None
    if rate is not None and not (math.isfinite(rate) and 0 < rate < 1000):
        rate = None
    readable = len(times)
    note = None
    if declared > readable:
        note = f"the file declares {declared} frames; frames from {readable} on cannot be read"
    clean = tuple(t for t in times if t is not None)
    start = clean[0] if len(clean) == readable else 0.0
    frame_times = tuple(t - start for t in clean) if len(clean) == readable else ()
    indices = _select(readable, rate, selection, path, "file", frame_times)
    h, w = _to_rgb(first).shape[:2]
    return VideoSource(
        path, "file", indices, (h, w), rate, readable, max_pixels, note=note,
        frame_times=frame_times,
    )  # fmt: skip


def _select(
    count: int,
    fps: float | None,
    s: FrameSelection,
    path: Path,
    kind: str,
    times: tuple[float, ...] = (),
) -> tuple[int, ...]:
    if s.has_time_range and fps is None and not times:
        if kind == "frames":
            raise UserError(f"{path} is a folder of frames: a time range needs `fps`")
        raise VideoLoadError(f"{path} declares no frame rate: a time range cannot be applied")
    indices = range(0, count, s.stride)
    if s.has_time_range:
        lo = s.start_s or 0.0
        hi = s.end_s if s.end_s is not None else math.inf
        time = times.__getitem__ if times else (lambda i: i / (fps or 1.0))
        indices = [i for i in indices if lo <= time(i) <= hi]  # type: ignore[assignment]
    chosen = tuple(indices)[: s.max_frames]
    if not chosen:
        raise VideoLoadError(f"no frame of {path} ({count} readable) is in the selected range")
    return chosen


def _decoded(path: Path) -> Generator[tuple[VideoFrame, VideoStream]]:
    """The frames of ``path``'s first video stream in order, as far as they can be decoded (a
    truncated or damaged file stops at the damage)."""
    import av

    # A damaged file is reported by our one-line errors; FFmpeg's own lines would repeat it.
    av.logging.set_level(None)
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError, ValueError) as e:
        raise VideoLoadError(f"cannot read video {path}: not a video file FFmpeg can open") from e
    with container:
        if not container.streams.video:
            raise VideoLoadError(f"cannot read video {path}: the file holds no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for frame in container.decode(stream):
                yield frame, stream
        except (av.FFmpegError, OSError, ValueError):
            return


def _to_rgb(frame: VideoFrame) -> RGBImage:
    """The frame as shown: 8-bit RGB, turned by the display matrix (phones record upright video
    as rotated frames and a flag)."""
    pixels = frame.to_ndarray(format="rgb24")
    turns = round(frame.rotation / 90) % 4  # counter-clockwise degrees to turn to show it
    return np.ascontiguousarray(np.rot90(pixels, turns) if turns else pixels)


def _check_pixels(width: int, height: int, max_pixels: int, path: Path) -> None:
    if width * height > max_pixels:
        raise VideoTooLargeError(
            f"video {path} has {width}x{height} frames, over the limit of {max_pixels} pixels"
        )
