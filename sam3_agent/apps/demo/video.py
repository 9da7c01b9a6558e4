"""Video requests of the web demo: SAM 3's video model loads on the first one and is shared
after; an upload is checked before any model work. No web framework here."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, fields
from pathlib import Path

from sam3_agent.agent import rundir
from sam3_agent.agent.loop import RoundEvent, check_query
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.agent.video.result import VideoResult
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.demo.sessions import (
    Session,
    SessionRunner,
    Update,
    upload_error,
    upload_name,
)
from sam3_agent.media.video import VideoLoadError, VideoSource, open_video
from sam3_agent.media.video_writer import write_web_video
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import UserError

logger = logging.getLogger(__name__)

LOADING = "loading SAM 3's video model (the first video request waits for it)..."
VideoUpdate = Update[VideoResult]


@dataclass(frozen=True, eq=False)
class UploadedVideo(VideoSource):
    """A video read from an upload's temporary copy, named in results as uploaded."""

    upload_name: str = ""

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "path": self.upload_name}


def check_stride(stride: float | int | None) -> int:
    """The page's frame stride as a whole number >= 1 (an empty box is 1)."""
    if stride is None:
        return 1
    if not (isinstance(stride, (int, float)) and math.isfinite(stride)):
        raise UserError(f"the frame stride must be a whole number >= 1, got {stride!r}")
    if stride < 1 or int(stride) != stride:
        raise UserError(f"the frame stride must be a whole number >= 1, got {stride:g}")
    return int(stride)


def check_upload(path: str | Path, stride: int, limits: VideoLimits) -> UploadedVideo:
    """Open the uploaded video at ``path`` for tracking every ``stride``-th frame, within
    ``limits`` (only its first frame is decoded). Errors name the file as uploaded."""
    path = Path(path)
    name = upload_name(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise VideoLoadError(f"cannot read the upload {name}: {e.strerror or e}") from e
    if size > limits.max_mb * 1e6:
        raise VideoLoadError(
            f"{name} is {size / 1e6:.1f} MB, over this demo's limit of {limits.max_mb:g} MB"
        )
    try:
        source = open_video(path, FrameSelection(stride=stride), max_pixels=limits.max_pixels)
    except VideoLoadError as e:
        raise VideoLoadError(upload_error(path, e)) from e
    if source.frame_count > limits.max_frames:
        needed = math.ceil(source.source_frames / limits.max_frames)
        raise VideoLoadError(
            f"{name}: {source.frame_count} frames to track, over this demo's limit of "
            f"{limits.max_frames}: set the frame stride to {needed} or more, or upload a "
            "shorter clip"
        )
    values = {f.name: getattr(source, f.name) for f in fields(VideoSource)}
    return UploadedVideo(**values, upload_name=name)


def describe_upload(video: VideoSource) -> str:
    """One line on a checked upload: what a request on it will track."""
    h, w = video.size
    rate = f", {video.fps:g} fps" if video.fps else ""
    note = f" ({video.note})" if video.note else ""
    return f"{video.frame_count} of {video.source_frames} frames to track, {w}x{h}{rate}{note}"


class VideoDemoRunner(SessionRunner[VideoResult]):
    """Answers the video requests of many browser sessions with one video model;
    ``build_agent`` runs (in a thread) on the first video request, again after a failure."""

    failed = "demo video request failed"

    def __init__(
        self,
        build_agent: Callable[[], Sam3VideoAgent],
        runs_dir: Path,
        limits: VideoLimits | None = None,
    ) -> None:
        super().__init__(runs_dir)
        self.limits = limits or VideoLimits()
        self._build_agent = build_agent
        self._agent: asyncio.Future[Sam3VideoAgent] | None = None

    async def agent(self, selection: FrameSelection) -> Sam3VideoAgent:
        """The agent tracking ``selection``'s frames on the one video model (a request
        stopped while it loads does not stop the loading)."""
        if self._agent is None or (self._agent.done() and self._agent.exception() is not None):
            self._agent = asyncio.ensure_future(asyncio.to_thread(self._build_agent))
        first = await asyncio.shield(self._agent)
        if selection == first.selection:
            return first
        return Sam3VideoAgent(
            first.video_segmenter, first.chat_model, first.config, first.options, selection
        )

    def run(
        self,
        key: str,
        video_path: str | Path | None,
        query: str,
        stride: float | int | None = 1,
    ) -> AsyncIterator[VideoUpdate]:
        """Answer ``query`` on the uploaded video, tracking every ``stride``-th frame, for
        session ``key``, as :meth:`SessionRunner._answer` streams it."""

        async def prepare() -> tuple[Session[VideoResult], str]:
            if video_path is None:
                raise UserError("upload a video first")
            check_query(query)
            frames = check_stride(stride)
            # Checked before any model work, so a refused upload answers at once.
            video = await asyncio.to_thread(check_upload, video_path, frames, self.limits)

            async def session(out: Path, on_round: Callable[[RoundEvent], None]) -> VideoResult:
                agent = await self.agent(FrameSelection(stride=frames))
                return await agent.arun(video, query, output_dir=out, on_round=on_round)

            loaded = (task := self._agent) is not None and task.done() and not task.exception()
            return session, "asking the model..." if loaded else LOADING

        return self._answer(key, query, prepare)

    def _downloads(self, out: Path, result: VideoResult | None) -> tuple[Path, ...]:
        files = [out / rundir.RESULT, out / rundir.OVERLAY_VIDEO, out / rundir.CONTACT_SHEET]
        return tuple(f for f in files if f.is_file())

    def _web_video(self, out: Path) -> Path | None:
        try:
            return write_web_video(out / rundir.OVERLAY_VIDEO, out / rundir.OVERLAY_WEB)
        except (OSError, VideoLoadError) as e:
            # The downloads still hold the overlay; the page says there is nothing to play.
            logger.warning("no WebM copy of %s for the page: %s", out / rundir.OVERLAY_VIDEO, e)
            return None
