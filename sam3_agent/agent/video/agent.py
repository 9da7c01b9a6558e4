"""The video agent: the image agent's loop over SAM 3 tracks.

:class:`Sam3VideoAgent` runs the same loop as :class:`~sam3_agent.agent.loop.Sam3Agent`
(tag and native protocols, corrections, budgets, context policies, hooks, checkpoint and
resume), with a :class:`~sam3_agent.agent.video.session.VideoSession`, the video tools
(:data:`~sam3_agent.agent.video.tools.VIDEO_TOOLS`) and the video templates of the prompt set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint
from sam3_agent.agent.ended import context_settings
from sam3_agent.agent.events import RoundCallback
from sam3_agent.agent.loop import Sam3Agent, check_query, run_blocking
from sam3_agent.agent.steps import Final
from sam3_agent.agent.video.outputs import write_video_run
from sam3_agent.agent.video.result import VideoResult
from sam3_agent.agent.video.session import VideoSession
from sam3_agent.agent.video.tools import VIDEO_TOOLS
from sam3_agent.backends.base import ChatModel, VideoSegmenter, preflight
from sam3_agent.media.video import FrameSelection, VideoSource, open_video
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.tracks import Tracks

__all__ = ["Sam3VideoAgent"]

VideoInput = str | Path | VideoSource
"""A video file, a folder of frames, or a video already opened with :func:`open_video`."""


class Sam3VideoAgent(Sam3Agent):
    """An MLLM that segments and tracks what a request describes through a video clip.

    Example::

        agent = Sam3VideoAgent(video_segmenter, chat_model)
        result = agent.run("clip.mp4", "the dog that enters last", output_dir="out/")
    """

    tool_registry = VIDEO_TOOLS
    prompt_kind = "video"

    def __init__(
        self,
        segmenter: VideoSegmenter,
        chat_model: ChatModel,
        config: AgentConfig | None = None,
        options: VideoOptions | None = None,
        selection: FrameSelection | None = None,
    ) -> None:
        """``options``: what the model is shown; ``selection``: which frames of a video
        given as a path are tracked (stride, count, time range)."""
        super().__init__(segmenter, chat_model, config)  # type: ignore[arg-type]
        self.video_segmenter = segmenter
        self.options = options or VideoOptions()
        self.selection = selection or FrameSelection()

    def run(  # type: ignore[override]
        self,
        video: VideoInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
    ) -> VideoResult:
        """Blocking form of :meth:`arun`."""
        coro = self.arun(video, query, output_dir=output_dir, on_round=on_round, resume=resume)
        return run_blocking(coro)

    async def arun(  # type: ignore[override]
        self,
        video: VideoInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
    ) -> VideoResult:
        """Answer ``query`` on ``video``.

        With ``output_dir``: ``result.json`` (tracks in the YouTube-VIS layout),
        ``overlay.mp4``, ``contact_sheet.png`` and ``trace.jsonl`` are written there (also
        when the session fails), and the session is committed after every round; with
        ``resume=True`` the saved session continues from its last committed round.

        Raises:
            UserError: empty query. VideoLoadError: unreadable video.
            ResumeError: nothing to resume, or another video, query or settings.
            ChatModelError, SegmenterError: a backend failed.
        """
        check_query(query)
        started = time.perf_counter()
        out = Path(output_dir) if output_dir is not None else None
        session, checkpoint = await asyncio.to_thread(
            self._new_video_session, video, query, out, resume
        )
        session.started = started  # opening the video is work on the session too

        async def conclude(final: Final | None, failure: str | None) -> VideoResult:
            result = self._video_result(session, final, failure)
            await self._write_video(result, out, session)
            return result

        return await self._drive(session, on_round, checkpoint, conclude)

    def _new_video_session(
        self, video: VideoInput, query: str, out: Path | None, resume: bool
    ) -> tuple[VideoSession, Checkpoint]:
        # First, so a bad video leaves no output directory behind.
        if not isinstance(video, VideoSource):
            video = open_video(video, self.selection, max_pixels=self.config.max_image_pixels)
        preflight(self.video_segmenter)  # type: ignore[arg-type]
        checkpoint = self._video_checkpoint(video, query, out, resume)
        session = VideoSession(
            config=self.config,
            options=self.options,
            segmenter=checkpoint.video_segmenter(self.video_segmenter),
            chat_model=checkpoint.chat_model(self.chat_model),
            video=video,
            query=query,
            prompts=checkpoint.prompt_set or self.prompts,
            checker_prompt=checkpoint.checker_prompt,
            trace=checkpoint.trace,
            token_counter=self.token_counter,
        )
        return session, checkpoint

    def _video_checkpoint(
        self, video: VideoSource, query: str, out: Path | None, resume: bool
    ) -> Checkpoint:
        return self._open_checkpoint(
            out,
            resume,
            lambda: Fingerprint.of_video(
                query=query,
                video=video,
                config=self.config,
                options=self._described_options(),
                model=self.chat_model.name,
                backends=self._backend_descriptions(self.video_segmenter),
            ),
        )

    def _described_options(self) -> dict[str, object]:
        return {"shown": self.options.describe(), "selection": self.selection.describe()}

    def _video_result(
        self, session: VideoSession, final: Final | None, failure: str | None
    ) -> VideoResult:
        tracks = session.empty_detections() if final is None else final.detections
        if not isinstance(tracks, Tracks):  # a video session selects tracks
            raise TypeError(f"a video session ended with {type(tracks).__name__}")
        timings = dict(session.timings)
        timings["total"] = session.total_s()
        return VideoResult(
            query=session.query,
            status="failed" if final is None else final.status,
            tracks=tracks,
            video=session.video.describe(),
            rounds=session.round,
            usage=session.usage,
            timings=timings,
            model=self.chat_model.name,
            failure=failure,
            phrases_tried=list(session.phrases),
            context=context_settings(self.config, self.token_counter.source),
            prompts=session.prompts.describe(),
            options=self._described_options(),
        )

    @staticmethod
    async def _write_video(result: VideoResult, out: Path | None, session: VideoSession) -> None:
        if out is None:
            return
        await asyncio.to_thread(write_video_run, out, result, session.video)
