"""Running the requests of many browser sessions on one agent, round by round.

:class:`DemoRunner` holds the one :class:`~sam3_agent.Sam3Agent` of the process (models load
once) and answers each request as an async stream of :class:`Update` values: one per
finished round, then one for the end. Each request runs as its own asyncio task, so a stop
(:meth:`DemoRunner.stop`) or a closed page cancels it cleanly; the agent then writes what it
has (``result.json`` with status ``failed``) before the stream ends. Errors end the stream
with a one-line message, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from sam3_agent.agent import rundir
from sam3_agent.agent.export import mask_file_name
from sam3_agent.agent.loop import RoundEvent, Sam3Agent, check_query
from sam3_agent.agent.result import AgentResult
from sam3_agent.values.errors import ImageLoadError, Sam3AgentError, UserError
from sam3_agent.values.files import safe_name
from sam3_agent.values.images import DEFAULT_MAX_PIXELS, RGBImage, downscale, load_image
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

State = Literal["running", "done", "stopped", "error"]

DISPLAY_SIDE = 1024
"""Longer side of the final image shown on the page, in pixels (downloads keep full size)."""


@dataclass(frozen=True)
class Update:
    """The state of one request, as the page shows it.

    Attributes:
        state: ``running`` while rounds arrive, then ``done``, ``stopped`` or ``error``.
        rounds: every finished round so far, in order.
        message: one line for the status bar (the error, for ``error``).
        result: the session's result once it ended (also for a stopped session).
        files: the downloads: ``result.json``, ``overlay.png``, one PNG per mask.
        output_dir: the run's directory; None for a request refused before it started (no
            image, an unreadable one, an empty query, a page already running one).
    """

    state: State
    rounds: tuple[RoundEvent, ...] = ()
    message: str = ""
    result: AgentResult | None = None
    files: tuple[Path, ...] = ()
    output_dir: Path | None = None


@dataclass(frozen=True)
class Annotations:
    """The final masks over the image for display: ``(h, w, 3)`` uint8 and ``(h, w)`` float
    masks in ``[0, 1]`` with labels like ``"1 (0.93)"`` (1-based mask number and score)."""

    image: RGBImage
    masks: list[tuple[np.ndarray, str]] = field(default_factory=list)


def load_display_image(path: str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> RGBImage:
    """The image at ``path``, downscaled for the page. Raises ImageLoadError (also above
    ``max_pixels``)."""
    return downscale(load_image(path, max_pixels=max_pixels), DISPLAY_SIDE)


def final_annotations(
    image_path: str | Path, result: AgentResult, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> Annotations:
    """The final masks of ``result`` on the image it was computed on, at display size."""
    display = load_display_image(image_path, max_pixels=max_pixels)
    h, w = display.shape[:2]
    labelled = []
    for i, (mask, score) in enumerate(
        zip(result.detections.masks, result.detections.scores.tolist(), strict=True)
    ):
        small = cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST)
        labelled.append((small.astype(np.float32), f"{i + 1} ({score:.2f})"))
    return Annotations(display, labelled)


def _downloads(out: Path, result: AgentResult | None) -> tuple[Path, ...]:
    files = [out / rundir.RESULT, out / rundir.OVERLAY]
    if result is not None and len(result.detections):
        # The run wrote them as `sam3-agent run --export png` does: masks/01.png, ...
        count = len(result.detections)
        files += [out / rundir.MASKS_DIR / mask_file_name(i, count) for i in range(count)]
    return tuple(f for f in files if f.is_file())


def new_run_dir(runs_dir: Path, key: str, query: str) -> Path:
    """A directory under ``runs_dir`` no request used yet, named by the time, the page's
    session and the query (made safe); not created."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = safe_name(f"{stamp}-{key[:8]}-{query}", max_len=80)
    out = runs_dir / name
    n = 1
    while out.exists():  # two requests of one session within a second
        n += 1
        out = runs_dir / f"{name}-{n}"
    return out


async def stream_rounds(
    task: asyncio.Task[Any], events: asyncio.Queue[RoundEvent]
) -> AsyncGenerator[tuple[RoundEvent, ...], None]:
    """Every round so far, each time one more arrives in ``events`` (the session's
    ``on_round``), until ``task`` (the session) ends; rounds queued before it ended come
    first."""
    rounds: list[RoundEvent] = []
    while True:
        if events.empty():
            if task.done():
                return
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()  # the session ended; rounds left are drained above
                continue
            rounds.append(getter.result())
        else:
            rounds.append(events.get_nowait())
        yield tuple(rounds)


def running_message(rounds: tuple[RoundEvent, ...]) -> str:
    """The status line while a session runs, after ``rounds`` (at least one)."""
    return f"round {rounds[-1].round} done; asking the model..."


async def settle(task: asyncio.Task[Any]) -> None:
    """Stop ``task`` (a session) if it still runs, and let it end: a stopped agent writes
    ``result.json`` before its request's resources go."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(task, return_exceptions=True)


class DemoRunner:
    """Answers the requests of many browser sessions with one agent.

    Args:
        agent: built once per process and shared (its backends are safe to share).
        runs_dir: each request writes to its own new directory under here.
    """

    def __init__(self, agent: Sam3Agent, runs_dir: Path) -> None:
        self.agent = agent
        self.runs_dir = runs_dir
        self._running: dict[str, asyncio.Task[AgentResult]] = {}

    @property
    def max_pixels(self) -> int:
        """The largest image (pixels) a request may bring: the agent's own limit
        (``--max-pixels``), checked on upload, before any model work."""
        return self.agent.config.max_image_pixels

    @property
    def active(self) -> int:
        """Requests running now."""
        return len(self._running)

    def stop(self, key: str) -> bool:
        """Stop the request of session ``key``; False when it has none running."""
        task = self._running.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def _out_dir(self, key: str, query: str) -> Path:
        return new_run_dir(self.runs_dir, key, query)

    async def run(
        self, key: str, image_path: str | Path | None, query: str
    ) -> AsyncIterator[Update]:
        """Answer ``query`` on the image at ``image_path`` for session ``key``.

        Yields one ``error`` update for a request refused before it starts; otherwise one
        ``running`` update without rounds when it starts, one per finished round, then one
        ``done``, ``stopped`` or ``error`` update. Closing the iterator early (the page went
        away) stops the session the same way :meth:`stop` does.
        """
        try:
            if image_path is None:
                raise UserError("upload an image (or pick an example) first")
            check_query(query)
            # Read before any model work, so a broken upload answers at once; the agent takes
            # these pixels, not the file again.
            pixels = await asyncio.to_thread(load_image, image_path, max_pixels=self.max_pixels)
            # Checked after the last await, so two requests of one page cannot both pass.
            if key in self._running:
                raise UserError("this page is already running a request; stop it first")
        except ImageLoadError as e:
            yield Update("error", message=upload_error(image_path, e))
            return
        except UserError as e:
            yield Update("error", message=one_line(e))
            return

        out = self._out_dir(key, query)
        events: asyncio.Queue[RoundEvent] = asyncio.Queue()
        task = asyncio.create_task(
            self.agent.arun(
                pixels,
                query,
                output_dir=out,
                on_round=events.put_nowait,
                exports=("png",),
                # result.json names the file as uploaded, not the server's temporary copy.
                image_path=upload_name(image_path),
            )
        )
        self._running[key] = task
        rounds: tuple[RoundEvent, ...] = ()
        try:
            yield Update("running", message="asking the model...", output_dir=out)
            async with contextlib.aclosing(stream_rounds(task, events)) as stream:
                async for rounds in stream:
                    yield Update("running", rounds, message=running_message(rounds), output_dir=out)
            yield await self._final(task, rounds, out)
        finally:
            self._running.pop(key, None)
            await settle(task)

    async def _final(
        self, task: asyncio.Task[AgentResult], rounds: tuple[RoundEvent, ...], out: Path
    ) -> Update:
        if task.cancelled():
            files = await asyncio.to_thread(_downloads, out, None)
            return Update(
                "stopped", rounds, "stopped: the files hold what the agent had", None, files, out
            )
        error = task.exception()
        if error is not None:
            if not isinstance(error, Sam3AgentError):
                # A bug: the server log gets the traceback, the page one line.
                logger.error("demo request failed", exc_info=error)
            files = await asyncio.to_thread(_downloads, out, None)
            return Update("error", rounds, one_line(error), None, files, out)
        result = task.result()
        files = await asyncio.to_thread(_downloads, out, result)
        return Update("done", rounds, "", result, files, out)


def upload_name(image_path: str | Path) -> str:
    """The uploaded file's own name: Gradio keeps it as the last part of its temporary path."""
    return Path(image_path).name


def upload_error(image_path: str | Path | None, error: ImageLoadError) -> str:
    """The page's message for an upload that cannot be read: the loader's own reason (too
    many pixels, not an image, ...), naming the file as uploaded, never the server's path."""
    if image_path is None:
        return one_line(error)
    name = upload_name(image_path)
    reason = one_line(str(error).replace(str(Path(image_path)), name))
    logger.info("unreadable upload %s: %s", name, reason)
    return reason
