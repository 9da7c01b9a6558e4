"""Video requests of the web demo: the upload checked, the rounds streamed, the overlay shown.

:class:`VideoDemoRunner` answers each page's video request as
:class:`~sam3_agent.apps.demo.sessions.DemoRunner` answers an image request: an async stream of
:class:`VideoUpdate` values, one per finished round, then one for the end; a stop or a closed
page cancels the session and the agent writes what it had. No web framework here.

* SAM 3's video model loads when the first video request comes (a demo used for images only
  never loads it); every later request shares it.
* An upload is checked before any model work against :class:`VideoLimits` (file size, frames
  to track, pixels per frame); each refusal is the loader's one line, naming the file as it
  was uploaded, never the server's temporary copy. ``result.json`` names it so too.
* The page shows the final overlay as a WebM copy (``overlay.webm``), which browsers play;
  the downloads are ``result.json``, ``overlay.mp4`` and ``contact_sheet.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    State,
    new_run_dir,
    running_message,
    settle,
    stream_rounds,
    upload_error,
    upload_name,
)
from sam3_agent.media.video import VideoLoadError, VideoSource, open_video
from sam3_agent.media.video_writer import write_web_video
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import Sam3AgentError, UserError
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

LOADING = "loading SAM 3's video model (the first video request waits for it)..."


@dataclass(frozen=True)
class VideoUpdate:
    """The state of one video request, as the page shows it.

    Attributes:
        state: ``running`` while the model loads and rounds arrive, then ``done``,
            ``stopped`` or ``error``.
        rounds: every finished round so far, in order.
        message: one line for the status bar (the error, for ``error``).
        result: the session's result once it ended (``done`` only).
        files: the downloads: ``result.json``, ``overlay.mp4``, ``contact_sheet.png``.
        output_dir: the run's directory; None for a request refused before it started (no
            video, a refused upload, an empty query, a page already running one).
        web_video: the overlay as WebM for the page (``done`` only; None when it could not
            be written).
    """

    state: State
    rounds: tuple[RoundEvent, ...] = ()
    message: str = ""
    result: VideoResult | None = None
    files: tuple[Path, ...] = ()
    output_dir: Path | None = None
    web_video: Path | None = None


@dataclass(frozen=True, eq=False)
class UploadedVideo(VideoSource):
    """A video read from an upload's temporary copy, which results name by the file name it
    was uploaded with (``upload_name``)."""

    upload_name: str = ""

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "path": self.upload_name}


def check_stride(stride: float | int | None) -> int:
    """The page's frame stride as a whole number >= 1 (an empty box is 1).

    Raises:
        UserError: anything else.
    """
    if stride is None:
        return 1
    if not (isinstance(stride, (int, float)) and math.isfinite(stride)):
        raise UserError(f"the frame stride must be a whole number >= 1, got {stride!r}")
    if stride < 1 or int(stride) != stride:
        raise UserError(f"the frame stride must be a whole number >= 1, got {stride:g}")
    return int(stride)


def check_upload(path: str | Path, stride: int, limits: VideoLimits) -> UploadedVideo:
    """Open the uploaded video at ``path`` for tracking every ``stride``-th frame, within
    ``limits``; nothing is decoded but its first frame.

    Raises:
        VideoLoadError: too large a file, not a readable video, too many frames to track, too
            large frames. One line, naming the file as uploaded.
    """
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


def _downloads(out: Path) -> tuple[Path, ...]:
    files = [out / rundir.RESULT, out / rundir.OVERLAY_VIDEO, out / rundir.CONTACT_SHEET]
    return tuple(f for f in files if f.is_file())


def _web_copy(out: Path) -> Path | None:
    try:
        return write_web_video(out / rundir.OVERLAY_VIDEO, out / rundir.OVERLAY_WEB)
    except (OSError, VideoLoadError) as e:
        # The downloads still hold the overlay; the page says there is nothing to play.
        logger.warning("no WebM copy of %s for the page: %s", out / rundir.OVERLAY_VIDEO, e)
        return None


class VideoDemoRunner:
    """Answers the video requests of many browser sessions with one video agent.

    Args:
        build_agent: loads SAM 3's video model and returns the agent, on the first video
            request (in a thread); a failed build is tried again by the next request.
        runs_dir: each request writes to its own new directory under here.
        limits: what an upload may be.
    """

    def __init__(
        self,
        build_agent: Callable[[], Sam3VideoAgent],
        runs_dir: Path,
        limits: VideoLimits | None = None,
    ) -> None:
        self.runs_dir = runs_dir
        self.limits = limits or VideoLimits()
        self._build_agent = build_agent
        self._agent: asyncio.Future[Sam3VideoAgent] | None = None
        self._running: dict[str, asyncio.Task[VideoResult]] = {}

    @property
    def active(self) -> int:
        """Requests running now."""
        return len(self._running)

    @property
    def loaded(self) -> bool:
        """Whether SAM 3's video model is loaded (a video request came and it loaded)."""
        task = self._agent
        return task is not None and task.done() and task.exception() is None

    def stop(self, key: str) -> bool:
        """Stop the request of session ``key``; False when it has none running."""
        task = self._running.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def agent(self, selection: FrameSelection) -> Sam3VideoAgent:
        """The agent tracking ``selection``'s frames, on the one video model (loaded on the
        first call; a request stopped meanwhile does not stop the loading).

        Raises:
            Sam3AgentError: the model could not be loaded.
        """
        if self._agent is None or (self._agent.done() and self._agent.exception() is not None):
            self._agent = asyncio.ensure_future(asyncio.to_thread(self._build_agent))
        first = await asyncio.shield(self._agent)
        if selection == first.selection:
            return first
        return Sam3VideoAgent(
            first.video_segmenter, first.chat_model, first.config, first.options, selection
        )

    async def run(
        self,
        key: str,
        video_path: str | Path | None,
        query: str,
        stride: float | int | None = 1,
    ) -> AsyncIterator[VideoUpdate]:
        """Answer ``query`` on the uploaded video at ``video_path``, tracking every
        ``stride``-th frame, for session ``key``.

        Yields one ``error`` update for a request refused before it starts (its
        ``output_dir`` None); otherwise one ``running`` update without rounds when it starts
        (saying when the model loads first), one per finished round, then one ``done``,
        ``stopped`` or ``error`` update. Closing the iterator early (the page went away)
        stops the session the same way :meth:`stop` does.
        """
        try:
            if video_path is None:
                raise UserError("upload a video first")
            check_query(query)
            frames = check_stride(stride)
            # Checked before any model work, so a refused upload answers at once.
            video = await asyncio.to_thread(check_upload, video_path, frames, self.limits)
            # Checked after the last await, so two requests of one page cannot both pass.
            if key in self._running:
                raise UserError("this page is already running a request; stop it first")
        except UserError as e:  # a refused upload (VideoLoadError) too
            yield VideoUpdate("error", message=one_line(e))
            return

        out = new_run_dir(self.runs_dir, key, query)
        events: asyncio.Queue[RoundEvent] = asyncio.Queue()

        async def session() -> VideoResult:
            agent = await self.agent(FrameSelection(stride=frames))
            return await agent.arun(video, query, output_dir=out, on_round=events.put_nowait)

        started = LOADING if not self.loaded else "asking the model..."
        task = asyncio.create_task(session())
        self._running[key] = task
        rounds: tuple[RoundEvent, ...] = ()
        try:
            yield VideoUpdate("running", message=started, output_dir=out)
            async with contextlib.aclosing(stream_rounds(task, events)) as stream:
                async for rounds in stream:
                    yield VideoUpdate("running", rounds, running_message(rounds), output_dir=out)
            yield await self._final(task, rounds, out)
        finally:
            self._running.pop(key, None)
            await settle(task)

    async def _final(
        self, task: asyncio.Task[VideoResult], rounds: tuple[RoundEvent, ...], out: Path
    ) -> VideoUpdate:
        if task.cancelled():
            files = await asyncio.to_thread(_downloads, out)
            message = "stopped: the files hold what the agent had"
            return VideoUpdate("stopped", rounds, message, None, files, out)
        error = task.exception()
        if error is not None:
            if not isinstance(error, Sam3AgentError):
                # A bug: the server log gets the traceback, the page one line.
                logger.error("demo video request failed", exc_info=error)
            files = await asyncio.to_thread(_downloads, out)
            return VideoUpdate("error", rounds, one_line(error), None, files, out)
        result = task.result()
        web = await asyncio.to_thread(_web_copy, out)
        files = await asyncio.to_thread(_downloads, out)
        return VideoUpdate("done", rounds, "", result, files, out, web)
