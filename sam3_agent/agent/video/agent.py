"""The video agent: the one agent loop given the video medium."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint
from sam3_agent.agent.checkpoint.state import Backends
from sam3_agent.agent.export import ExportFormat
from sam3_agent.agent.loop import Agent
from sam3_agent.agent.prompts import PromptKind
from sam3_agent.agent.steps import Final
from sam3_agent.agent.video.result import VideoResult
from sam3_agent.agent.video.session import VideoScene
from sam3_agent.agent.video.tools import VIDEO_TOOLS
from sam3_agent.backends.base import ChatModel, ChecksReady, VideoSegmenter
from sam3_agent.media.video import FrameSelection, VideoSource, open_video
from sam3_agent.media.video_render import contact_sheet
from sam3_agent.media.video_writer import write_overlay_video
from sam3_agent.values.config import AgentConfig, VideoOptions
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import atomic_write_json, write_png
from sam3_agent.values.tracks import Tracks

__all__ = ["Sam3VideoAgent", "VideoMedium"]

VideoInput = str | Path | VideoSource  # a file, a folder of frames, or an opened video


class VideoMedium:
    kind: PromptKind = "video"
    tools = VIDEO_TOOLS

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

    def preflight(self) -> None:
        if isinstance(self.segmenter, ChecksReady):
            self.segmenter.check()

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
