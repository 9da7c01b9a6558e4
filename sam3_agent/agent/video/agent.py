"""The video agent: the one agent loop given the video medium. Tracks are shown on a sheet
of frames; a check may answer Uncertain and name frames (``<frames>A-B</frames>``) for a closer
look (the AgentRVOS idea)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint
from sam3_agent.agent.checkpoint.state import Backends
from sam3_agent.agent.checks import CheckPlan, CheckRequest, CheckView
from sam3_agent.agent.loop import Agent
from sam3_agent.agent.parsing import parse_frame_range
from sam3_agent.agent.prompts import PromptKind, PromptSet
from sam3_agent.agent.result import VideoResult
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.agent.session import Scene, Session
from sam3_agent.agent.steps import Final
from sam3_agent.agent.tools import TOOLS, Registry, with_kept
from sam3_agent.backends.base import ChatModel, VideoEmbedding, VideoSegmenter
from sam3_agent.media.video import FrameSelection, VideoSource, open_video
from sam3_agent.media.video_render import (
    contact_sheet,
    render_sheet,
    render_track_check,
    sample_positions,
)
from sam3_agent.media.video_writer import write_overlay_video
from sam3_agent.values.config import AgentConfig, ToolSet, VideoOptions
from sam3_agent.values.detections import Exemplars
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import atomic_write_json, write_png
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.tracks import Track, Tracks, postprocess_tracks

__all__ = ["Sam3VideoAgent", "VideoMedium"]

VideoInput = str | Path | VideoSource  # a file, a folder of frames, or an opened video

MAX_LOOK_FRAMES = 8  # frames a closer look may show

# The image agent's four tools, by the same names and handlers, described for tracks.
VIDEO_TOOLS: Registry = {
    **TOOLS,
    "segment_phrase": replace(
        TOOLS["segment_phrase"],
        description=(
            "Ask SAM 3 to find every instance of a short noun phrase in every frame of the "
            "clip and follow each through time as one track. All current tracks are replaced "
            "by the new ones, which you receive numbered from 1 (highest score first) on a "
            "sheet of frames where they exist, with the frames each track spans."
        ),
    ),
    "examine_each_mask": replace(
        TOOLS["examine_each_mask"],
        description=(
            "Have every current track checked on its own against the request, over a few "
            "frames where it exists with a close-up of each. Rejected tracks are removed, "
            "tracks the checker could not settle are kept and marked Uncertain, and the rest "
            "are renumbered from 1 on a new sheet."
        ),
    ),
    "select_masks_and_return": replace(
        TOOLS["select_masks_and_return"],
        description=(
            "Finish with the tracks that answer the request, given by their numbers on the "
            "most recent sheet of numbered tracks."
        ),
        parameters_text='"final_answer_masks": a list of track numbers (integers).',
    ),
    "report_no_mask": replace(
        TOOLS["report_no_mask"],
        description="Finish without tracks, when nothing in the clip matches the request.",
    ),
}


class VideoScene(Scene[Tracks]):
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

    def empty(self) -> Tracks:
        return Tracks(self.video.frame_count, self.video.size)

    async def segment(
        self, session: Session[Tracks], phrase: str, exemplars: Exemplars | None = None
    ) -> tuple[Tracks, str]:
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

    def numbered(self, candidates: Tracks, kept: Tracks | None = None) -> RGBImage:
        positions = sample_positions(candidates, self.video.frame_count, self.options.frames_shown)
        return self._sheet(positions, candidates, kept)

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

    def _sheet(
        self, positions: list[int], tracks: Tracks | None, kept: Tracks | None = None
    ) -> RGBImage:
        return render_sheet(
            self.video, positions, tracks, max_side=self.config.max_image_side, kept=kept
        )

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


class VideoMedium:
    kind: PromptKind = "video"
    # Exemplars are boxes on one image; the video tracker is asked with the phrase alone.
    tool_sets: Mapping[ToolSet, Registry] = {
        "paper": VIDEO_TOOLS,
        "extended": with_kept(VIDEO_TOOLS, "tracks"),
    }

    def __init__(
        self, segmenter: VideoSegmenter, options: VideoOptions, selection: FrameSelection
    ) -> None:
        self.segmenter = segmenter
        self.options = options
        self.selection = selection

    def described_options(self) -> dict[str, object]:
        return {"shown": self.options.describe(), "selection": self.selection.describe()}

    def open(
        self,
        source: VideoInput,
        config: AgentConfig,
        *,
        image_path: str | Path | None,
        exports: Iterable[ExportFormat],
    ) -> VideoScene:
        if image_path is not None or tuple(exports):
            raise UserError(
                "exports and image_path are for image sessions; a video session writes its "
                "overlay and contact sheet, and result.json names its file"
            )
        if not isinstance(source, VideoSource):
            source = open_video(source, self.selection, max_pixels=config.max_image_pixels)
        return VideoScene(source, config, self.options)

    def fingerprint(
        self, scene: VideoScene, query: str, config: AgentConfig, model: str, backends: Backends
    ) -> Fingerprint:
        settings = {**config.to_dict(), "video": self.described_options()}
        video = scene.video
        return Fingerprint.of_input(query, video.digest(), video.size, settings, model, backends)

    def attach(self, scene: VideoScene, checkpoint: Checkpoint) -> None:
        scene.segmenter = checkpoint.video_segmenter(self.segmenter)

    def result(
        self, scene: VideoScene, fields: dict[str, Any], final: Final[Tracks] | None
    ) -> VideoResult:
        return VideoResult(
            **fields,
            tracks=scene.empty() if final is None else final.detections,
            video=scene.video.describe(),
            options=self.described_options(),
        )

    def write(self, out: Path, result: VideoResult, scene: VideoScene) -> None:
        """The overlay video (streamed: memory flat in the clip's length) and the contact
        sheet of the selected tracks, then ``result.json``."""
        result.output_dir = out
        document = result.to_json()
        video, tracks, query = scene.video, result.tracks, result.query
        write_overlay_video(video, tracks, out / rundir.OVERLAY_VIDEO, query=query)
        write_png(out / rundir.CONTACT_SHEET, contact_sheet(video, tracks, query=query))
        document["files"] = {"overlay": rundir.OVERLAY_VIDEO, "contact_sheet": rundir.CONTACT_SHEET}
        atomic_write_json(out / rundir.RESULT, document)


class Sam3VideoAgent(Agent[VideoInput, VideoScene, VideoResult]):
    """The agent on video clips. Example::

    agent = Sam3VideoAgent(video_segmenter, chat_model)
    result = agent.run("clip.mp4", "the dog that enters last", output_dir="out/")
    """

    def __init__(
        self,
        segmenter: VideoSegmenter,
        chat_model: ChatModel,
        config: AgentConfig | None = None,
        options: VideoOptions | None = None,
        selection: FrameSelection | None = None,
    ) -> None:
        self.options = options or VideoOptions()
        self.selection = selection or FrameSelection()
        self.video_segmenter = segmenter
        super().__init__(VideoMedium(segmenter, self.options, self.selection), chat_model, config)
