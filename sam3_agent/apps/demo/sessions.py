"""The image and video requests of many browser sessions, each streamed round by round from
its own asyncio task; an upload is checked before any model work, an error is one line."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import cv2
import numpy as np

from sam3_agent.agent import rundir
from sam3_agent.agent.loop import RoundEvent, Sam3Agent, check_query
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.rundir import mask_file_name
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.tasks import BuiltOnce, end_session, start_session
from sam3_agent.media.video import VideoLoadError, VideoSource, open_video
from sam3_agent.values.config import FrameSelection, ToolSet
from sam3_agent.values.errors import ImageLoadError, Sam3AgentError, UserError
from sam3_agent.values.files import safe_name
from sam3_agent.values.images import DEFAULT_MAX_PIXELS, RGBImage, downscale, load_image
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

State = Literal["running", "done", "stopped", "error"]
R = TypeVar("R")

DISPLAY_SIDE = 1024
"""Longer side of the final image shown on the page, in pixels (downloads keep full size)."""


@dataclass(frozen=True)
class Update(Generic[R]):
    """One request's state as the page shows it: ``result`` and ``web_video`` (the H.264
    overlay) with ``done`` only; no ``output_dir`` for a request refused before it started."""

    state: State
    rounds: tuple[RoundEvent, ...] = ()
    message: str = ""
    result: R | None = None
    files: tuple[Path, ...] = ()
    output_dir: Path | None = None
    web_video: Path | None = None


Session = Callable[[Path, Callable[[RoundEvent], None]], Coroutine[Any, Any, R]]
"""One request's agent session, given its run directory and the ``on_round`` callback."""


def load_display_image(path: str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> RGBImage:
    """The image at ``path``, downscaled for the page (ImageLoadError above ``max_pixels``)."""
    return downscale(load_image(path, max_pixels=max_pixels), DISPLAY_SIDE)


def final_annotations(
    image_path: str | Path, result: AgentResult, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[RGBImage, list[tuple[np.ndarray, str]]]:
    """The image ``result`` was computed on, at display size, and its final masks over it:
    ``(h, w)`` float32 in ``[0, 1]``, labelled ``"1 (0.93)"`` (1-based number and score)."""
    display = load_display_image(image_path, max_pixels=max_pixels)
    h, w = display.shape[:2]
    labelled = []
    for i, (mask, score) in enumerate(
        zip(result.detections.masks, result.detections.scores.tolist(), strict=True)
    ):
        small = cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST)
        labelled.append((small.astype(np.float32), f"{i + 1} ({score:.2f})"))
    return display, labelled


def new_run_dir(runs_dir: Path, key: str, query: str) -> Path:
    """A new directory name under ``runs_dir``: the time, the page's session, the query."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = safe_name(f"{stamp}-{key[:8]}-{query}", max_len=80)
    out = runs_dir / name
    n = 1
    while out.exists():  # two requests of one session within a second
        n += 1
        out = runs_dir / f"{name}-{n}"
    return out


class SessionRunner(Generic[R]):
    """One request at a time per page, its rounds streamed as :class:`Update` values; a stop
    or a closed page cancels it (the agent writes what it has before the stream ends)."""

    failed = "demo request failed"  # the server log's line above a bug's traceback

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._running: dict[str, asyncio.Task[R]] = {}

    @property
    def active(self) -> int:
        return len(self._running)

    def stop(self, key: str) -> bool:
        """Stop the request of session ``key``; False when it has none running."""
        task = self._running.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def _downloads(self, out: Path, result: R | None) -> list[Path]:
        """The files a request may offer for download; those written are offered."""
        raise NotImplementedError  # pragma: no cover

    async def _answer(
        self, key: str, query: str, prepare: Callable[[], Awaitable[tuple[Session[R], str]]]
    ) -> AsyncIterator[Update[R]]:
        """Answer session ``key``'s request: ``prepare`` checks it before any model work (a
        :class:`UserError`: one ``error`` update) and gives its session and first status."""
        try:
            session, started = await prepare()
            # Checked after the last await, so two requests of one page cannot both pass.
            if key in self._running:
                raise UserError("this page is already running a request; stop it first")
        except UserError as e:
            yield Update("error", message=one_line(e))
            return

        out = new_run_dir(self.runs_dir, key, query)
        task, events = start_session(partial(session, out))
        self._running[key] = task
        rounds: tuple[RoundEvent, ...] = ()
        try:
            yield Update("running", message=started, output_dir=out)
            async for event in events:
                rounds += (event,)
                message = f"round {event.round} done; asking the model..."
                yield Update("running", rounds, message, output_dir=out)
            yield await self._final(task, rounds, out)
        finally:
            self._running.pop(key, None)
            # A stopped agent writes result.json before its request's resources go.
            await end_session(task, shield=False)

    async def _final(
        self, task: asyncio.Task[R], rounds: tuple[RoundEvent, ...], out: Path
    ) -> Update[R]:
        state: State
        result = None
        if task.cancelled():
            state, message = "stopped", "stopped: the files hold what the agent had"
        elif (error := task.exception()) is not None:
            if not isinstance(error, Sam3AgentError):
                # A bug: the server log gets the traceback, the page one line.
                logger.error(self.failed, exc_info=error)
            state, message = "error", one_line(error)
        else:
            state, message, result = "done", "", task.result()
        offered = self._downloads(out, result)
        files = await asyncio.to_thread(lambda: tuple(f for f in offered if f.is_file()))
        # The page plays a video's H.264 overlay as it is.
        web = out / rundir.OVERLAY_VIDEO if state == "done" else None
        return Update(state, rounds, message, result, files, out, web if web in files else None)


class DemoRunner(SessionRunner[AgentResult]):
    """Image requests, with one shared agent per tool set on ``agent``'s models."""

    def __init__(self, agent: Sam3Agent, runs_dir: Path) -> None:
        super().__init__(runs_dir)
        self.agent = agent
        self._agents: dict[ToolSet, Sam3Agent] = {agent.config.tool_set: agent}

    def agent_with(self, tool_set: ToolSet | None) -> Sam3Agent:
        """The agent offering ``tool_set`` (None: ``agent``'s), otherwise as ``agent``, built
        on first use; an unknown tool set is the config's :class:`UserError`."""
        if tool_set is None:
            return self.agent
        found = self._agents.get(tool_set)
        if found is None:
            config = dataclasses.replace(self.agent.config, tool_set=tool_set)
            found = Sam3Agent(self.agent.segmenter, self.agent.chat_model, config)
            self._agents[found.config.tool_set] = found
        return found

    @property
    def max_pixels(self) -> int:
        """The largest image (pixels) a request may bring: the agent's own limit."""
        return self.agent.config.max_image_pixels

    def run(
        self, key: str, image_path: str | Path | None, query: str, tool_set: ToolSet | None = None
    ) -> AsyncIterator[Update[AgentResult]]:
        """Answer ``query`` on the uploaded image with ``tool_set``'s agent (None: the demo's)."""

        async def prepare() -> tuple[Session[AgentResult], str]:
            if image_path is None:
                raise UserError("upload an image (or pick an example) first")
            check_query(query)
            agent = self.agent_with(tool_set)
            # Read before any model work, so a broken upload answers at once.
            try:
                pixels = await asyncio.to_thread(load_image, image_path, max_pixels=self.max_pixels)
            except ImageLoadError as e:
                raise UserError(upload_error(image_path, e)) from e

            def session(out: Path, on_round: Callable[[RoundEvent], None]) -> Any:
                return agent.arun(
                    pixels,
                    query,
                    output_dir=out,
                    on_round=on_round,
                    exports=("png",),
                    # result.json names the file as uploaded, not the server's copy.
                    image_path=upload_name(image_path),
                )

            return session, "asking the model..."

        return self._answer(key, query, prepare)

    def _downloads(self, out: Path, result: AgentResult | None) -> list[Path]:
        files = [out / rundir.RESULT, out / rundir.OVERLAY]
        if result is not None and len(result.detections):
            # The run wrote them as `sam3-agent run --export png` does: masks/01.png, ...
            count = len(result.detections)
            files += [out / rundir.MASKS_DIR / mask_file_name(i, count) for i in range(count)]
        return files


def upload_name(image_path: str | Path) -> str:
    """The uploaded file's own name: Gradio keeps it as the last part of its temporary path."""
    return Path(image_path).name


def upload_error(image_path: str | Path, error: ImageLoadError) -> str:
    """The loader's reason an upload cannot be read, naming the file as uploaded."""
    name = upload_name(image_path)
    reason = one_line(str(error).replace(str(Path(image_path)), name))
    logger.info("unreadable upload %s: %s", name, reason)
    return reason


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
    """The uploaded video at ``path``, every ``stride``-th frame, within ``limits`` (only its
    first frame decoded); errors name the file as uploaded."""
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
    """Video requests on one video model, built by ``build_agent`` on the first of them."""

    failed = "demo video request failed"

    def __init__(
        self,
        build_agent: Callable[[], Sam3VideoAgent],
        runs_dir: Path,
        limits: VideoLimits | None = None,
    ) -> None:
        super().__init__(runs_dir)
        self.limits = limits or VideoLimits()
        self._first = BuiltOnce(build_agent)

    async def agent(self, selection: FrameSelection) -> Sam3VideoAgent:
        """The agent tracking ``selection``'s frames on the one video model."""
        first = await self._first.get()
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
        """Answer ``query`` on the uploaded video, tracking every ``stride``-th frame."""

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

            return session, "asking the model..." if self._first.ready else LOADING

        return self._answer(key, query, prepare)

    def _downloads(self, out: Path, result: VideoResult | None) -> list[Path]:
        return [out / rundir.RESULT, out / rundir.OVERLAY_VIDEO, out / rundir.CONTACT_SHEET]
