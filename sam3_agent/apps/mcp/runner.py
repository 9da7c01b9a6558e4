"""The tool calls of one MCP server, on models built once (SAM 3's video model on the first
``track`` call), at most ``max_concurrent`` at once; a cancelled call stops its session,
which writes what it has before the call ends. A call names its input as a local path, an
``http(s)://`` URL or, for images, base64 data; every failure is a one-line
:class:`~sam3_agent.values.errors.UserError`."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from sam3_agent.agent.events import RoundCallback, RoundEvent
from sam3_agent.agent.loop import Sam3Agent, check_query
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.sam3_only import segment_only
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.apps.tasks import BuiltOnce, end_session, start_session
from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB, Downloads, Kind, downloads
from sam3_agent.media.video import open_video
from sam3_agent.runs.rundirs import claim_default_run_dir
from sam3_agent.values.config import AgentConfig, FrameSelection
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.files import safe_name
from sam3_agent.values.images import RGBImage, load_image

logger = logging.getLogger(__name__)

R = TypeVar("R")
Report = Callable[[RoundEvent], Awaitable[None]]
"""Told each round of a call's session as it ends (the MCP progress notification)."""

BASE64_NAME = "(base64 data)"
"""What ``result.json`` names as the image of a call that sent it inline."""


@dataclass(frozen=True)
class Source:
    """An input ready for a session: ``local`` (a file), its name in ``result.json``, its
    run directory's stem and, for a URL, the download's record."""

    local: Path
    shown_as: str
    stem: str
    downloaded: dict[str, Any] | None = None


def decode_base64(text: str, max_bytes: int) -> bytes:
    """The bytes of base64 ``text`` (a ``data:...;base64,`` prefix allowed), at most
    ``max_bytes``."""
    if text[:5].lower() == "data:":
        header, comma, text = text.partition(",")
        if not comma or not header.lower().endswith(";base64"):
            raise UserError("image_base64: a data: URL must be data:<type>;base64,<data>")
    data = "".join(text.split())
    if not data:
        raise UserError("image_base64 holds no data")
    if len(data) // 4 * 3 > max_bytes:
        raise UserError(
            f"image_base64 decodes to more than {max_bytes // (1024 * 1024)} MB "
            "(`--max-download-mb`)"
        )
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise UserError(f"image_base64 is not valid base64 data ({e})") from e


def resolve(fetched: Downloads, path_or_url: str | None, data: str | None, kind: Kind) -> Source:
    """The one input of a call: ``path_or_url`` or base64 ``data`` (images only)."""
    if (path_or_url is None) == (data is None):
        given = "image or image_base64" if kind == "image" else "video"
        raise UserError(f"give exactly one of {given}")
    if data is not None:
        inline = fetched.directory / "inline-image"
        inline.write_bytes(decode_base64(data, fetched.max_bytes))
        return Source(inline, BASE64_NAME, "base64")
    if not path_or_url or not path_or_url.strip():
        raise UserError(f"the {kind} path is empty")
    local, download = fetched.resolve(path_or_url, kind)
    if download is None:
        path = Path(local).expanduser()
        return Source(path, str(path), path.stem)
    return Source(download.path, download.url, download.stem, download.record())


def pixels_of(source: Source, max_pixels: int) -> RGBImage:
    """The image of ``source``; errors name it as ``shown_as``, not the server's file."""
    try:
        return load_image(source.local, max_pixels=max_pixels)
    except ImageLoadError as e:
        raise ImageLoadError(str(e).replace(str(source.local), source.shown_as)) from e


@dataclass(frozen=True)
class Done(Generic[R]):
    """A call's session ended: its result and its run directory."""

    result: R
    directory: Path


class McpRunner:
    """Answers the ``segment``, ``track`` and ``segment_phrase`` calls of one server."""

    def __init__(
        self,
        spec: BackendSpec,
        config: AgentConfig,
        out: Path,
        *,
        max_concurrent: int = 2,
        max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
        segmenter: Segmenter | None = None,
        chat_model: ChatModel | None = None,
    ) -> None:
        """``spec`` planned (its MLLM explicit); SAM 3 and the MLLM are built now unless given."""
        self.spec, self.config, self.out = spec, config, out
        self.max_download_mb = max_download_mb
        self.segmenter = segmenter or spec.build_segmenter()
        self.chat_model = chat_model or spec.build_chat_model()
        self.agent = Sam3Agent(self.segmenter, self.chat_model, config)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._video = BuiltOnce(lambda: self.spec.build_video_segmenter())

    async def segment(
        self, image: str | None, image_base64: str | None, query: str, report: Report,
        *, max_rounds: int | None = None,
    ) -> Done[AgentResult]:  # fmt: skip
        """The agent on one image: a path, an http(s) URL or base64 data."""
        check_query(query)
        agent = self.agent
        if max_rounds is not None:
            agent = Sam3Agent(self.segmenter, self.chat_model, self._config(max_rounds))
        async with self._slots:
            with downloads(self.max_download_mb) as fetched:
                source = await asyncio.to_thread(resolve, fetched, image, image_base64, "image")
                pixels = await asyncio.to_thread(pixels_of, source, self.config.max_image_pixels)
                out = self._run_dir(source, query)

                def session(on_round: RoundCallback) -> Coroutine[Any, Any, AgentResult]:
                    return agent.arun(
                        pixels, query, output_dir=out, on_round=on_round,
                        image_path=source.shown_as, downloaded=source.downloaded,
                    )  # fmt: skip

                return Done(await _rounds(session, report), out)

    async def segment_phrase(
        self, image: str | None, image_base64: str | None, phrase: str,
        *, score_threshold: float | None = None,
    ) -> Done[AgentResult]:  # fmt: skip
        """SAM 3 alone on one image with ``phrase``: every mask above the threshold."""
        check_query(phrase)
        config = self.config
        if score_threshold is not None:
            config = replace(config, score_threshold=score_threshold)
        async with self._slots:
            with downloads(self.max_download_mb) as fetched:
                source = await asyncio.to_thread(resolve, fetched, image, image_base64, "image")
                pixels = await asyncio.to_thread(pixels_of, source, config.max_image_pixels)
                out = self._run_dir(source, phrase)
                result = await asyncio.to_thread(
                    segment_only, self.segmenter, pixels, phrase, config=config, output_dir=out,
                    image_path=source.shown_as, downloaded=source.downloaded,
                )  # fmt: skip
                return Done(result, out)

    async def track(
        self, video: str, query: str, report: Report,
        *, max_rounds: int | None = None, stride: int = 1, max_frames: int | None = None,
    ) -> Done[VideoResult]:  # fmt: skip
        """The agent on one video (a file, a frame folder or an http(s) URL)."""
        check_query(query)
        selection = FrameSelection(stride=stride, max_frames=max_frames)
        config = self.config if max_rounds is None else self._config(max_rounds)
        async with self._slots:
            with downloads(self.max_download_mb) as fetched:
                source = await asyncio.to_thread(resolve, fetched, video, None, "video")
                # Opened (indexed, no pixel kept) first: a bad video leaves no run directory.
                clip = await asyncio.to_thread(
                    open_video, source.local, selection, max_pixels=config.max_image_pixels
                )
                segmenter = await self._video.get()
                agent = Sam3VideoAgent(segmenter, self.chat_model, config, selection=selection)
                out = self._run_dir(source, query)

                def session(on_round: RoundCallback) -> Coroutine[Any, Any, VideoResult]:
                    return agent.arun(
                        clip, query, output_dir=out, on_round=on_round,
                        downloaded=source.downloaded,
                    )  # fmt: skip

                return Done(await _rounds(session, report), out)

    def _config(self, max_rounds: int) -> AgentConfig:
        return replace(self.config, max_rounds=max_rounds)

    def _run_dir(self, source: Source, query: str) -> Path:
        return claim_default_run_dir(safe_name(f"{source.stem}-{query}", max_len=64), self.out)


async def _rounds(session: Callable[[RoundCallback], Coroutine[Any, Any, R]], report: Report) -> R:
    """``session``'s result, each round ``report``-ed as it ends."""
    task, rounds = start_session(session)
    try:
        async for event in rounds:
            await report(event)
        return task.result()
    finally:
        # Shielded: the call's own cancellation would interrupt the wait at every await.
        await end_session(task, shield=True)
