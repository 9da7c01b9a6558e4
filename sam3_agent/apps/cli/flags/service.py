"""The flags of ``serve-sam3`` beside the SAM 3 ones: the service's limits and its video side."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.apps.cli.flags.video import VIDEO_CACHE_MB
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, MIB, ServiceLimits

SERVICE = "Service"

_service = functools.partial(flag, panel=SERVICE)

LIMIT_FLAGS = (
    _service("cache_size", int, 8, "--cache-size", metavar="N",
             help="Images whose backbone features stay cached (LRU)."),
    _service("max_upload_mb", float, DEFAULT_LIMITS.max_upload_bytes / MIB, "--max-upload-mb",
             metavar="MB", help="Largest image file accepted, in MiB."),
    _service("max_pixels", int, DEFAULT_LIMITS.max_pixels, "--max-pixels", metavar="PIXELS",
             help="Largest width x height accepted."),
    _service("store_images", int, DEFAULT_LIMITS.max_stored_images, "--store-images",
             metavar="N", help="Decoded images kept for later requests (LRU)."),
    _service("store_mb", float, DEFAULT_LIMITS.max_stored_bytes / MIB, "--store-mb",
             metavar="MB",
             help="Memory for decoded images kept for later requests, in MiB (LRU)."),
    _service("max_concurrent_decodes", int, DEFAULT_LIMITS.max_concurrent_decodes,
             "--max-concurrent-decodes", metavar="N",
             help="Uploaded images decoded at the same time; others wait."),
    _service("max_concurrent_uploads", int, DEFAULT_LIMITS.max_concurrent_uploads,
             "--max-concurrent-uploads", metavar="N",
             help="Requests carrying an image (uploads, inline base64) at once; a body is "
             "read only inside such a slot."),
    _service("max_concurrent_segments", int, DEFAULT_LIMITS.max_concurrent_segments,
             "--max-concurrent-segments", metavar="N",
             help="Segment requests at work at once (model calls, masks, encoding)."),
    _service("max_waiting", int, DEFAULT_LIMITS.max_waiting, "--max-waiting", metavar="N",
             help="Requests of each kind that may wait for a slot; past that the service "
             "answers 503 with Retry-After."),
)  # fmt: skip
LIMITS = FlagGroup("limits", LIMIT_FLAGS, lambda values, built: dict(values))

VIDEO_SERVICE = "Video service"

_video_service = functools.partial(flag, panel=VIDEO_SERVICE)

VIDEO_SERVICE_FLAGS = (
    _video_service("video", bool, False, "--video/--no-video",
                   help="Also load SAM 3's video model (from the same --sam3 weights, at "
                   "start) and track videos for agents (sam3-agent track --sam3-url)."),
    VIDEO_CACHE_MB,
    _video_service("max_video_mb", float, DEFAULT_LIMITS.max_video_bytes / MIB, "--max-video-mb",
                   metavar="MB",
                   help="Largest video upload (a video file or a tar of frames), in MiB; "
                   "streamed to disk."),
    _video_service("max_video_frames", int, DEFAULT_LIMITS.max_video_frames, "--max-video-frames",
                   metavar="N", help="Most frames an uploaded video may have."),
    _video_service("video_store_mb", float, DEFAULT_LIMITS.max_stored_video_bytes / MIB,
                   "--video-store-mb", metavar="MB",
                   help="Disk for uploaded videos kept for later requests, in MiB (LRU; "
                   "deleted on eviction and when the server stops)."),
    _video_service("video_dir", Path | None, None, "--video-dir", metavar="DIR",
                   help="Where uploaded videos are kept (a temporary folder is made inside; "
                   "default: the system's temporary folder)."),
    _video_service("max_concurrent_tracks", int, DEFAULT_LIMITS.max_concurrent_tracks,
                   "--max-concurrent-tracks", metavar="N",
                   help="Track requests at work at once; others wait (--max-waiting)."),
)  # fmt: skip
VIDEO_SERVICE_GROUP = FlagGroup(
    "video_service", VIDEO_SERVICE_FLAGS, lambda values, built: dict(values)
)


def service_limits(
    limits: dict[str, float], video: dict[str, Any], waiting: float
) -> ServiceLimits:
    """The :class:`ServiceLimits` of the checked ``LIMITS`` and ``VIDEO_SERVICE_GROUP`` values."""
    return ServiceLimits(
        max_upload_bytes=int(limits["max_upload_mb"] * MIB),
        max_pixels=int(limits["max_pixels"]),
        max_stored_images=int(limits["store_images"]),
        max_stored_bytes=int(limits["store_mb"] * MIB),
        max_concurrent_decodes=int(limits["max_concurrent_decodes"]),
        max_concurrent_uploads=int(limits["max_concurrent_uploads"]),
        max_concurrent_segments=int(limits["max_concurrent_segments"]),
        max_video_bytes=int(video["max_video_mb"] * MIB),
        max_video_frames=int(video["max_video_frames"]),
        max_stored_video_bytes=int(video["video_store_mb"] * MIB),
        max_concurrent_tracks=int(video["max_concurrent_tracks"]),
        max_waiting=int(waiting),
    )
