"""The video medium's scene: tracks shown on a sheet of frames; a check may answer Uncertain
and name frames (``<frames>A-B</frames>``) for a closer look (the AgentRVOS idea)."""

from __future__ import annotations

import asyncio

from sam3_agent.agent.checks import CheckPlan, CheckRequest, CheckView
from sam3_agent.agent.parsing import parse_frame_range
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.session import Session
from sam3_agent.backends.base import VideoEmbedding, VideoSegmenter
from sam3_agent.media.sheet_layout import sample_positions
from sam3_agent.media.video import VideoSource
from sam3_agent.media.video_render import render_sheet, render_track_check
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.tracks import Track, Tracks, postprocess_tracks

MAX_LOOK_FRAMES = 8  # frames a closer look may show


class VideoScene:
    answer_type = Tracks

    def __init__(self, video: VideoSource, config: AgentConfig, options: VideoOptions) -> None:
        self.video = video
        self.config = config
        self.options = options
        self.check_plan = CheckPlan(uncertain=True, extra_looks=options.uncertain_looks)
        self.segmenter: VideoSegmenter | None = None
        self._embedding: VideoEmbedding | None = None
        # The task sheet: the clip spread evenly, before any phrase.
        positions = sample_positions(None, video.frame_count, options.frames_shown)
        self.task_image = self._encode(self._sheet(positions, None), "input")

    @property
    def mask_size(self) -> tuple[int, int]:
        return self.video.size

    def start(self, session: Session[Tracks]) -> None:
        """Nothing to start: frames are decoded when a phrase is tracked."""

    async def close(self) -> None:
        """Nothing is left running between rounds."""

    def empty(self) -> Tracks:
        return Tracks(self.video.frame_count, self.video.size)

    async def segment(self, session: Session[Tracks], phrase: str) -> tuple[Tracks, str]:
        """SAM 3 tracks ``phrase`` through the clip (video SAM 3 reads the phrase whole)."""
        segmenter, threshold = self.segmenter, self.config.score_threshold
        if segmenter is None:
            raise RuntimeError("the scene has no segmenter: VideoMedium.attach one first")

        def run() -> Tracks:
            if self._embedding is None:
                self._embedding = segmenter.open(self.video)
            raw = self._embedding.track([phrase], threshold)[0]
            return postprocess_tracks(
                raw, score_threshold=threshold, overlap_threshold=self.config.overlap_threshold
            )

        with session.timed("segment"):
            return await asyncio.to_thread(run), phrase

    def numbered(self, candidates: Tracks) -> RGBImage:
        positions = sample_positions(candidates, self.video.frame_count, self.options.frames_shown)
        return self._sheet(positions, candidates)

    def describe(self, candidates: Tracks, prompts: PromptSet) -> str | None:
        return "\n".join(
            prompts.feedback("track_line", number=i + 1, extent=self.extent_text(track, prompts))
            for i, track in enumerate(candidates)
        )

    def extent_text(self, track: Track, prompts: PromptSet) -> str:
        extent = track.extent
        if extent is None:
            return ""
        first, last = (self.video.indices[p] for p in extent)
        return prompts.feedback(
            "extent",
            first=first,
            last=last,
            start_s=self.video.time_of(first),
            end_s=self.video.time_of(last),
            present=len(track.masks),
            used=self.video.frame_count,
        )

    async def check_views(self, session: Session[Tracks], candidates: Tracks) -> list[CheckView]:
        return [_TrackLooks(self, session, candidates, i) for i in range(len(candidates))]

    def _sheet(self, positions: list[int], tracks: Tracks | None) -> RGBImage:
        return render_sheet(self.video, positions, tracks, max_side=self.config.max_image_side)

    def _encode(self, image: RGBImage, name: str) -> EncodedImage:
        return EncodedImage.encode(image, name, quality=self.config.jpeg_quality)


class _TrackLooks:
    """One track's looks: ``check_frames`` of its extent, then (after Uncertain) the frames
    the checker named, else the extent, denser."""

    def __init__(
        self, scene: VideoScene, session: Session[Tracks], tracks: Tracks, index: int
    ) -> None:
        self.number = index + 1
        self._scene, self._session, self._total = scene, session, len(tracks)
        self._track = tracks[index]
        self._within = self._track.extent
        self._count = scene.options.check_frames

    async def request(self, look: int) -> CheckRequest:
        session, scene = self._session, self._scene
        name = f"r{session.round:03d}_check{self.number:02d}_look{look}"
        image = await asyncio.to_thread(self._render, name)
        extent = scene.extent_text(self._track, session.prompts)
        details = {"extent": extent, "attempt": look}
        return CheckRequest(self.number, self._total, (image,), image, image, details)

    def _render(self, name: str) -> EncodedImage:
        scene, track = self._scene, self._track
        video = scene.video
        single = Tracks(video.frame_count, video.size, (track,))
        positions = sample_positions(single, video.frame_count, self._count, within=self._within)
        pixels = render_track_check(
            video, track, positions, max_side=scene.config.max_image_side, number=self.number
        )
        image = scene._encode(pixels, name)
        self._session.trace.save_image(image)
        return image

    def closer(self, reply: str) -> None:
        self._within = self._positions_of(parse_frame_range(reply)) or self._within
        options = self._scene.options
        self._count = min(MAX_LOOK_FRAMES, max(self._count, 2 * options.check_frames))

    def _positions_of(self, frames: tuple[int, int] | None) -> tuple[int, int] | None:
        """The positions of source ``frames`` within the track's extent; None if they miss it."""
        extent = self._track.extent
        if frames is None or extent is None:
            return None
        indices = self._scene.video.indices
        inside = [
            p for p in range(extent[0], extent[1] + 1) if frames[0] <= indices[p] <= frames[1]
        ]
        return (inside[0], inside[-1]) if inside else None
