"""The state of one video session: the clip, its current tracks, and what the model sees.

:class:`VideoSession` is the video counterpart of :class:`~sam3_agent.agent.session.Session`
with the same surface for the loop, the hooks, the checkpoint and the tools: ``segment``
returns mask tracks, ``show_masks`` a sheet of a few frames with every track numbered
consistently across them, and the tool ``examine_each_mask`` runs one isolated check per track
(:mod:`sam3_agent.agent.video.checks`), where a checker may answer Uncertain.

What the model sees is bounded whatever the clip's length: a sheet holds at most
``VideoOptions.frames_shown`` frames, sampled where the candidates exist, and each track's
temporal extent is stated in text.
"""

from __future__ import annotations

import asyncio
import logging

from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.session import SessionProgress
from sam3_agent.agent.trace import Trace
from sam3_agent.backends.base import ChatModel, VideoEmbedding, VideoSegmenter
from sam3_agent.media.sheet_layout import sample_positions
from sam3_agent.media.video import VideoSource
from sam3_agent.media.video_render import render_sheet
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.tracks import Track, Tracks, postprocess_tracks

logger = logging.getLogger(__name__)


class VideoSession(SessionProgress[Tracks]):
    """One request on a video: the clip, a query, and everything that changes answering it."""

    answer_type = Tracks

    def __init__(
        self,
        *,
        config: AgentConfig,
        options: VideoOptions,
        segmenter: VideoSegmenter,
        chat_model: ChatModel,
        video: VideoSource,
        query: str,
        prompts: PromptSet,
        checker_prompt: str,
        trace: Trace,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self.prompts = prompts
        self.chat_model = chat_model
        self.video = video
        self.query = query
        self.trace = trace
        self.token_counter = token_counter or TokenCounter()
        self._segmenter = segmenter
        self._checker_prompt = checker_prompt
        self._embedding: VideoEmbedding | None = None
        self._start_progress()
        # The task sheet: the clip spread evenly, before any phrase.
        positions = sample_positions(None, video.frame_count, options.frames_shown)
        self.task_image = self._encode(self._sheet(positions, None), "input")

    @property
    def mask_size(self) -> tuple[int, int]:
        return self.video.size

    # -- lifecycle (the loop's) ------------------------------------------------------------

    def start(self) -> None:
        """Nothing to start ahead: frames are decoded when a phrase is tracked."""

    async def close(self) -> None:
        """Nothing is left running between rounds."""

    # -- tracks (the tools') ---------------------------------------------------------------

    def empty_detections(self) -> Tracks:
        return Tracks(self.video.frame_count, self.video.size)

    async def select(self, tracks: Tracks, indices: list[int]) -> Tracks:
        """``tracks`` at the 0-based ``indices`` (no pixels are copied: tracks are RLE)."""
        return tracks.select(indices)

    async def segment(self, phrase: str) -> tuple[Tracks, str]:
        """SAM 3 tracks ``phrase`` through the clip, post-processed; they become the current
        tracks. Also returns the phrase as read (video SAM 3 reads it whole)."""
        with self.timed("segment"):

            def run() -> Tracks:
                if self._embedding is None:
                    self._embedding = self._segmenter.open(self.video)
                raw = self._embedding.track([phrase], self.config.score_threshold)[0]
                return postprocess_tracks(
                    raw,
                    score_threshold=self.config.score_threshold,
                    overlap_threshold=self.config.overlap_threshold,
                )

            tracks = await asyncio.to_thread(run)
        self.phrases.append(phrase)
        self.current = tracks if len(tracks) else None
        return tracks, phrase

    async def show_masks(self, tracks: Tracks) -> EncodedImage:
        """A sheet of frames where ``tracks`` exist, numbered; saved to the trace."""
        name = f"r{self.round:03d}_masks"

        def render() -> EncodedImage:
            positions = sample_positions(tracks, self.video.frame_count, self.options.frames_shown)
            image = self._encode(self._sheet(positions, tracks), name)
            self.trace.save_image(image)
            return image

        with self.timed("render"):
            return await asyncio.to_thread(render)

    def describe_tracks(self, tracks: Tracks) -> str:
        """One line per track: its number and where in the clip it exists (prompt text)."""
        return "\n".join(
            self.prompts.feedback("track_line", number=i + 1, extent=self.extent_text(track))
            for i, track in enumerate(tracks)
        )

    def extent_text(self, track: Track) -> str:
        """Where ``track`` exists, in the clip's own frame numbers and seconds."""
        extent = track.extent
        if extent is None:
            return ""
        first, last = (self.video.indices[p] for p in extent)
        return self.prompts.feedback(
            "extent",
            first=first,
            last=last,
            start_s=self.video.time_of(first),
            end_s=self.video.time_of(last),
            present=len(track.masks),
            used=self.video.frame_count,
        )

    # -- checks ----------------------------------------------------------------------------

    @property
    def checker_prompt(self) -> str:
        return self._checker_prompt

    # -- rendering -------------------------------------------------------------------------

    def _sheet(self, positions: list[int], tracks: Tracks | None) -> RGBImage:
        return render_sheet(self.video, positions, tracks, max_side=self.config.max_image_side)

    def _encode(self, image: RGBImage, name: str) -> EncodedImage:
        return EncodedImage.encode(image, name, quality=self.config.jpeg_quality)
