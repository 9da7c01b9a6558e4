"""``sam3-agent serve-sam3``: host SAM 3 over HTTP for agents on other machines. With
``--video`` the video model loads at start too, so missing weights fail before it listens."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags.agent import SAM3
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.servers import SERVICE, VIDEO_SERVICE
from sam3_agent.apps.service.limits import MIB, ServiceLimits
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.backends.identity import TOKEN_ENV
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.values.errors import UserError


@with_flags(SAM3, SERVICE, VIDEO_SERVICE, VERBOSE)
def serve_sam3(
    host: Annotated[str, typer.Option("--host", metavar="HOST", rich_help_panel="Service",
        help="Address to listen on. Anything but loopback requires a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on.",
        rich_help_panel="Service")] = 8100,
    token: Annotated[str | None, typer.Option("--token", metavar="TOKEN", envvar=TOKEN_ENV,
        help=f"Bearer token clients must send (required unless listening on loopback). "
        f"Prefer the {TOKEN_ENV} environment variable: a flag is visible in `ps`.",
        rich_help_panel="Service")] = None,
    model: Annotated[str | None, typer.Option("--model", metavar="MODEL", hidden=True,
        help="The former name of --sam3.")] = None,
    *, backends: BackendSpec, limits: dict[str, float], video_service: dict[str, Any],
    verbose: bool,
) -> None:  # fmt: skip
    """Serve SAM 3 over HTTP (agents use it with --sam3-url).

    Exit codes: 0 stopped (Ctrl+C), 1 the model could not load or the server failed,
    2 a bad flag, an unsafe --host without a token, or a port in use.
    """
    # A server says when it is up: INFO by default.
    logging.getLogger().setLevel(logging.DEBUG if verbose else logging.INFO)
    with one_line_errors():
        backends = replace(
            backends, sam3=backends.sam3 if model is None else model,
            sam3_cache_size=int(limits.pop("cache_size")),
            video_cache_mb=int(video_service.pop("video_cache_mb")),
        )  # fmt: skip
        backends.validate(chat=False)
        waiting, video = limits.pop("max_waiting"), bool(video_service.pop("video"))
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
        n = {name: int(value) for name, value in numbers.items()}
        limited = ServiceLimits(
            max_upload_bytes=int(limits["max_upload_mb"] * MIB), max_pixels=n["max_pixels"],
            max_stored_images=n["store_images"], max_stored_bytes=int(limits["store_mb"] * MIB),
            max_concurrent_decodes=n["max_concurrent_decodes"],
            max_concurrent_uploads=n["max_concurrent_uploads"],
            max_concurrent_segments=n["max_concurrent_segments"],
            max_video_bytes=int(video_service["max_video_mb"] * MIB),
            max_video_frames=n["max_video_frames"],
            max_stored_video_bytes=int(video_service["video_store_mb"] * MIB),
            max_concurrent_tracks=n["max_concurrent_tracks"], max_waiting=int(waiting),
        )  # fmt: skip
        from sam3_agent.apps.service import server

        server.serve(
            backends.build_segmenter(), host=host, port=port, token=token or None, limits=limited,
            video_segmenter=backends.build_video_segmenter() if video else None,
            video_dir=video_dir.expanduser() if video_dir is not None else None,
        )  # fmt: skip


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0
