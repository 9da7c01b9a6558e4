"""The flags of ``sam3-agent demo`` beside the backend and agent ones: its server and videos."""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.values.errors import UserError

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
