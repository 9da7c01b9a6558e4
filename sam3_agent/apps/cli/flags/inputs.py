"""The input flags: how big a download may be (``--max-download-mb``: ``run``, ``track``,
``batch``, ``mcp``), which frames of a video are tracked, and what the model is shown of them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sam3_agent.apps.cli.console import SETTING_OF
from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.backends.segmenters import DEFAULT_VIDEO_CACHE_MB
from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB
from sam3_agent.values.config import FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError

MAX_DOWNLOAD_MB = flag(
    "max_download_mb", int, DEFAULT_MAX_DOWNLOAD_MB, "--max-download-mb", metavar="MB",
    panel="Input", help="Largest download of an image or video given as an http(s) URL.",
)  # fmt: skip


def _max_download_mb(values: dict[str, Any], built: dict[str, Any]) -> int:
    value = int(values["max_download_mb"])
    if value < 1:
        raise UserError(f"--max-download-mb must be >= 1, got {value}")
    return value


DOWNLOADS = FlagGroup("max_download_mb", (MAX_DOWNLOAD_MB,), _max_download_mb)

VIDEO_PANEL = "Video"

_video = functools.partial(flag, panel=VIDEO_PANEL)


@dataclass(frozen=True)
class VideoFlags:
    """What the ``VIDEO`` group hands a command."""

    selection: FrameSelection
    options: VideoOptions
    cache_mb: int
    """SAM 3's per-frame feature cache (``BackendSpec.video_cache_mb``)."""


VIDEO_CACHE_MB = _video(
    "video_cache_mb", int, DEFAULT_VIDEO_CACHE_MB, "--video-cache-mb", metavar="MB",
    help="MB of SAM 3 frame features kept to answer a second phrase without the "
    "backbone (0: recompute).",
)  # fmt: skip
"""``--video-cache-mb``: in ``track`` (the ``VIDEO`` group) and ``serve-sam3 --video``."""

VIDEO_FLAGS = (
    _video("stride", int, 1, "--stride", metavar="N", help="Track every N-th frame of the video."),
    _video("max_frames", int | None, None, "--max-frames", metavar="N",
           help="Track at most this many frames (after --stride and the time range)."),
    _video("start", float | None, None, "--start", metavar="SECONDS",
           help="Skip frames before this time (s)."),
    _video("end", float | None, None, "--end", metavar="SECONDS",
           help="Skip frames after this time (s)."),
    _video("fps", float | None, None, "--fps", metavar="FPS",
           help="Frame rate of a folder of frames (for --start/--end and times shown)."),
    _video("frames_shown", int, VideoOptions.frames_shown, "--frames-shown", metavar="N",
           help="Frames on each sheet the MLLM sees (1-16), whatever the clip's length."),
    _video("check_frames", int, VideoOptions.check_frames, "--check-frames", metavar="N",
           help="Frames one track's isolated check sees (1-16)."),
    _video("uncertain_looks", int, VideoOptions.uncertain_looks, "--uncertain-looks", metavar="N",
           help="Closer looks a track gets after an Uncertain verdict (0-4)."),
    VIDEO_CACHE_MB,
)  # fmt: skip


def _video_flags(values: dict[str, Any], built: dict[str, Any]) -> VideoFlags:
    frames = ("stride", "max_frames", "start", "end", "fps")
    selection = FrameSelection(**{SETTING_OF.get(name, name): values[name] for name in frames})
    shown = {name: values[name] for name in ("frames_shown", "check_frames", "uncertain_looks")}
    return VideoFlags(selection, VideoOptions(**shown), values["video_cache_mb"])


VIDEO = FlagGroup("video_flags", VIDEO_FLAGS, _video_flags)
