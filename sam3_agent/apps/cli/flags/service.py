"""The flags of ``serve-sam3`` beside the SAM 3 ones, each group handing a dict of values."""

from __future__ import annotations

import functools
from pathlib import Path

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.apps.cli.flags.video import VIDEO_CACHE_MB
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, MIB

LIMITS = DEFAULT_LIMITS
_service = functools.partial(flag, panel="Service")
_video = functools.partial(flag, panel="Video service")
SERVICE = FlagGroup("limits", (
    _service("cache_size", int, 8, "--cache-size", metavar="N",
             help="Images whose backbone features stay cached (LRU)."),
    _service("max_upload_mb", float, LIMITS.max_upload_bytes / MIB, "--max-upload-mb",
             metavar="MB", help="Largest image file accepted, in MiB."),
    _service("max_pixels", int, LIMITS.max_pixels, "--max-pixels", metavar="PIXELS",
             help="Largest width x height accepted."),
    _service("store_images", int, LIMITS.max_stored_images, "--store-images", metavar="N",
             help="Decoded images kept for later requests (LRU)."),
    _service("store_mb", float, LIMITS.max_stored_bytes / MIB, "--store-mb", metavar="MB",
             help="Memory for decoded images kept for later requests, in MiB (LRU)."),
    _service("max_concurrent_decodes", int, LIMITS.max_concurrent_decodes,
             "--max-concurrent-decodes", metavar="N",
             help="Uploaded images decoded at the same time; others wait."),
    _service("max_concurrent_uploads", int, LIMITS.max_concurrent_uploads,
             "--max-concurrent-uploads", metavar="N",
             help="Requests carrying an image (uploads, inline base64) at once; a body is "
             "read only inside such a slot."),
    _service("max_concurrent_segments", int, LIMITS.max_concurrent_segments,
             "--max-concurrent-segments", metavar="N",
             help="Segment requests at work at once (model calls, masks, encoding)."),
    _service("max_waiting", int, LIMITS.max_waiting, "--max-waiting", metavar="N",
             help="Requests of each kind that may wait for a slot; past that the service "
             "answers 503 with Retry-After."),
), lambda values, built: dict(values))  # fmt: skip
VIDEO_SERVICE = FlagGroup("video_service", (
    _video("video", bool, False, "--video/--no-video",
           help="Also load SAM 3's video model (from the same --sam3 weights, at start) and "
           "track videos for agents (sam3-agent track --sam3-url)."),
    VIDEO_CACHE_MB,
    _video("max_video_mb", float, LIMITS.max_video_bytes / MIB, "--max-video-mb", metavar="MB",
           help="Largest video upload (a video file or a tar of frames), in MiB; streamed to "
           "disk."),
    _video("max_video_frames", int, LIMITS.max_video_frames, "--max-video-frames", metavar="N",
           help="Most frames an uploaded video may have."),
    _video("video_store_mb", float, LIMITS.max_stored_video_bytes / MIB, "--video-store-mb",
           metavar="MB", help="Disk for uploaded videos kept for later requests, in MiB (LRU; "
           "deleted on eviction and when the server stops)."),
    _video("video_dir", Path | None, None, "--video-dir", metavar="DIR",
           help="Where uploaded videos are kept (a temporary folder is made inside; default: "
           "the system's temporary folder)."),
    _video("max_concurrent_tracks", int, LIMITS.max_concurrent_tracks, "--max-concurrent-tracks",
           metavar="N", help="Track requests at work at once; others wait (--max-waiting)."),
), lambda values, built: dict(values))  # fmt: skip
