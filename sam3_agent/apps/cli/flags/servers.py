"""The flags of the server commands (``serve-sam3``, ``demo``, ``mcp``) beside the SAM 3,
backend and agent ones, checked before any model loads."""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.apps.cli.flags.inputs import VIDEO_CACHE_MB
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, MIB
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.values.errors import UserError
from sam3_agent.values.paths import check_writable_dir
from sam3_agent.values.text import visible

# serve-sam3

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
"""``serve-sam3``'s own flags, as a dict of their values."""

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
"""``serve-sam3 --video`` and the video service's bounds, as a dict of their values."""

# demo

DEMO_PANEL = "Demo server"
DEMO_TOKEN_ENV = "SAM3_AGENT_DEMO_TOKEN"

_demo = functools.partial(flag, panel=DEMO_PANEL)

DEMO_FLAGS = (
    _demo("host", str, "127.0.0.1", "--host", metavar="HOST",
          help="Address to listen on. Anything but loopback requires a token."),
    _demo("port", int, 7860, "--port", metavar="PORT", help="Port to listen on."),
    _demo("token", str | None, None, "--token", metavar="TOKEN", envvar=DEMO_TOKEN_ENV,
          help="Password of the page (any user name), and bearer token of the SAM 3 API "
          "with --serve-sam3-api. Required unless listening on loopback."),
    _demo("out", Path, Path("runs/demo"), "--out", "-o", metavar="DIR",
          help="Each request writes its files under here."),
    _demo("concurrency", int, 2, "--concurrency", metavar="N",
          help="Requests that run at the same time; the others wait in a queue."),
    _demo("serve_sam3_api", bool, False, "--serve-sam3-api",
          help="Also serve the SAM 3 service's API (/health, /v1/*, as serve-sam3 does) on "
          "this process's segmenter."),
    _demo("video", bool, True, "--video/--no-video",
          help="A video tab beside the image one; SAM 3's video model loads on the first "
          "video request."),
    _demo("max_video_mb", float, VideoLimits.max_mb, "--max-video-mb", metavar="MB",
          help="Largest video upload, in megabytes."),
    _demo("max_video_frames", int, VideoLimits.max_frames, "--max-video-frames", metavar="N",
          help="Most frames one video request tracks (after its stride); a longer clip is "
          "refused with the stride that fits."),
)  # fmt: skip


@dataclass(frozen=True)
class DemoFlags:
    """What the ``DEMO`` group hands the command (each field its flag's value)."""

    host: str
    port: int
    token: str | None
    out: Path
    concurrency: int
    serve_sam3_api: bool
    video: bool
    max_video_mb: float
    max_video_frames: int


DEMO = FlagGroup("demo", DEMO_FLAGS, lambda values, built: DemoFlags(**values))
"""``--host``, ``--port``, ``--token`` ... of ``demo``, listed before the backend flags."""


def check_demo_flags(flags: DemoFlags) -> None:
    """Refuse what cannot work before anything loads."""
    if importlib.util.find_spec("gradio") is None:
        raise UserError('the demo needs gradio: pip install "sam3-agent[demo]" (or gradio)')
    if not 1 <= flags.port <= 65535:
        raise UserError(f"--port must be in 1..65535, got {flags.port}")
    if flags.concurrency < 1:
        raise UserError(f"--concurrency must be >= 1, got {flags.concurrency}")
    check_bind_security(
        flags.host, flags.token, serving="serve the demo", token_env=DEMO_TOKEN_ENV,
        spends="spend your GPU and tokens",
    )  # fmt: skip
    check_port_free(flags.host, flags.port)


# mcp

MCP_PANEL = "MCP server"
MCP_TOKEN_ENV = "SAM3_AGENT_MCP_TOKEN"

_mcp = functools.partial(flag, panel=MCP_PANEL)

MCP_FLAGS = (
    _mcp("http", str | None, None, "--http", metavar="ADDRESS",
         help="Serve over streamable HTTP at ADDRESS, HOST:PORT (http://HOST:PORT/mcp), instead "
         "of stdio. Anything but loopback requires a token."),
    _mcp("token", str | None, None, "--token", metavar="TOKEN", envvar=MCP_TOKEN_ENV,
         help="Bearer token HTTP clients must send (required unless listening on loopback). "
         f"Prefer the {MCP_TOKEN_ENV} environment variable: a flag is visible in `ps`."),
    _mcp("out", Path, Path("runs/mcp"), "--out", "-o", metavar="DIR",
         help="Each tool call writes its run directory under here."),
    _mcp("max_concurrent", int, 2, "--max-concurrent", metavar="N",
         help="Tool calls at work at once; the others wait for a slot."),
)  # fmt: skip


@dataclass(frozen=True)
class McpFlags:
    """What the ``MCP`` group hands the command: ``host``/``port`` None for stdio."""

    host: str | None
    port: int | None
    token: str | None
    out: Path
    max_concurrent: int


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port in 1..65535."""
    host, colon, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(
            "--http must be HOST:PORT with a port in 1..65535 (e.g. 127.0.0.1:8765), "
            f"got {visible(text, 80)!r}"
        )
    return host, int(port)


def _mcp_flags(values: dict[str, Any], built: dict[str, Any]) -> McpFlags:
    if values["max_concurrent"] < 1:
        raise UserError(f"--max-concurrent must be >= 1, got {values['max_concurrent']}")
    token = values["token"] or None
    host: str | None = None
    port: int | None = None
    if values["http"] is not None:
        host, port = parse_bind(values["http"])
        check_bind_security(
            host, token, serving="serve MCP", token_env=MCP_TOKEN_ENV,
            spends="spend your GPU and tokens",
        )  # fmt: skip
        check_port_free(host, port)
    out = Path(values["out"]).expanduser()
    check_writable_dir(out, "--out")
    return McpFlags(host, port, token, out, values["max_concurrent"])


MCP = FlagGroup("mcp", MCP_FLAGS, _mcp_flags)
"""The ``mcp`` flags, checked, as :class:`McpFlags`."""
