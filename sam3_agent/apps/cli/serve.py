"""``sam3-agent serve-sam3``: host SAM 3 over HTTP for agents on other machines.

Takes the SAM 3 flags of every other command (``--sam3``, ``--device``, ``--dtype``; the
older spelling ``--model`` still works), and fails in one line like them. With ``--video``
it also loads SAM 3's video model from the same weights, at start (so missing weights or a
bad flag fail before the server listens, and a service for images alone never holds it),
and tracks videos at ``/v1/videos``.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags import SAM3, VERBOSE, FlagGroup, flag, with_flags
from sam3_agent.apps.cli.flags.video import VIDEO_CACHE_MB
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, MIB, ServiceLimits
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.backends.service_auth import TOKEN_ENV
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.values.errors import UserError

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


@with_flags(SAM3, LIMITS, VIDEO_SERVICE_GROUP, VERBOSE)
def serve_sam3(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="HOST",
            help="Address to listen on. Anything but loopback requires a token.",
            rich_help_panel=SERVICE,
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", help="Port to listen on.", rich_help_panel=SERVICE),
    ] = 8100,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            envvar=TOKEN_ENV,
            help=f"Bearer token clients must send (required unless listening on loopback). "
            f"Prefer the {TOKEN_ENV} environment variable: a flag is visible in `ps`.",
            rich_help_panel=SERVICE,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="MODEL", hidden=True, help="The former name of --sam3."),
    ] = None,
    *,
    backends: BackendSpec,
    limits: dict[str, float],
    video_service: dict[str, Any],
    verbose: bool,
) -> None:
    """Serve SAM 3 over HTTP (agents use it with --sam3-url).

    Exit codes: 0 stopped (Ctrl+C), 1 the model could not load or the server failed,
    2 a bad flag, an unsafe --host without a token, or a port in use.
    """
    # A server says when it is up: INFO by default.
    logging.getLogger().setLevel(logging.DEBUG if verbose else logging.INFO)
    with one_line_errors():
        if model is not None:
            backends = replace(backends, sam3=model)
        backends = replace(
            backends,
            sam3_cache_size=int(limits.pop("cache_size")),
            video_cache_mb=int(video_service.pop("video_cache_mb")),
        )
        backends.validate(chat=False)
        waiting = limits.pop("max_waiting")
        video = bool(video_service.pop("video"))
        video_dir: Path | None = video_service.pop("video_dir")
        numbers = {**limits, **video_service}
        bad = [f"--{n.replace('_', '-')}" for n, v in numbers.items() if not _positive(v)]
        if bad:
            raise UserError(f"{', '.join(bad)} must be a positive number")
        if video_dir is not None:
            check_writable_dir(video_dir, "--video-dir")
        if not (_positive(waiting + 1) and waiting == int(waiting)):
            raise UserError(f"--max-waiting must be a count >= 0, got {waiting}")
        if not 1 <= port <= 65535:
            raise UserError(f"--port must be in 1..65535, got {port}")
        # Refuse an unsafe bind or a taken port before spending a minute loading weights.
        check_bind_security(host, token)
        check_port_free(host, port)
        service_limits = ServiceLimits(
            max_upload_bytes=int(limits["max_upload_mb"] * MIB),
            max_pixels=int(limits["max_pixels"]),
            max_stored_images=int(limits["store_images"]),
            max_stored_bytes=int(limits["store_mb"] * MIB),
            max_concurrent_decodes=int(limits["max_concurrent_decodes"]),
            max_concurrent_uploads=int(limits["max_concurrent_uploads"]),
            max_concurrent_segments=int(limits["max_concurrent_segments"]),
            max_video_bytes=int(video_service["max_video_mb"] * MIB),
            max_video_frames=int(video_service["max_video_frames"]),
            max_stored_video_bytes=int(video_service["video_store_mb"] * MIB),
            max_concurrent_tracks=int(video_service["max_concurrent_tracks"]),
            max_waiting=int(waiting),
        )
        from sam3_agent.apps.service import server

        segmenter = backends.build_segmenter()
        video_segmenter = backends.build_video_segmenter() if video else None
        server.serve(
            segmenter,
            host=host,
            port=port,
            token=token or None,
            limits=service_limits,
            video_segmenter=video_segmenter,
            video_dir=video_dir.expanduser() if video_dir is not None else None,
        )


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0
