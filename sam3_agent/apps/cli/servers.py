"""The server commands: ``serve-sam3`` (SAM 3 over HTTP for agents on other machines; with
``--video`` the video model loads at start too, so missing weights fail before it listens),
``demo`` (the web page) and ``mcp`` (the agent as an MCP server over stdio or streamable HTTP).
Every flag is checked before any model loads, and before ``gradio`` or ``mcp`` imports."""

from __future__ import annotations

import importlib.util
import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, plain, say
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, SAM3, plan_server
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS
from sam3_agent.apps.cli.flags.servers import (
    DEMO,
    MCP,
    SERVICE,
    VIDEO_SERVICE,
    DemoFlags,
    McpFlags,
    check_demo_flags,
)
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.service.limits import MIB, ServiceLimits
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.backends.identity import TOKEN_ENV
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.values.config import AgentConfig
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


@with_flags(DEMO, BACKENDS, AGENT, VERBOSE)
def demo_command(
    *,
    demo: DemoFlags,
    backends: BackendSpec,
    config: AgentConfig,
    verbose: bool,
) -> None:
    """Serve a web page: upload an image or a video, say what to segment, watch each round.

    Exit codes: 0 stopped (Ctrl+C), 1 a model could not load or the server failed,
    2 a bad flag, an unsafe --host without a token, or a port in use.
    """
    with one_line_errors():
        check_demo_flags(demo)
        limits = VideoLimits(demo.max_video_mb, demo.max_video_frames, config.max_image_pixels)
        spec = plan_server(backends, config, demo.out)  # before any download

        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.apps.demo.server import bundled_examples, create_app, serve
        from sam3_agent.apps.demo.sessions import DemoRunner

        with err_console.status(plain("loading models...")):
            segmenter = spec.build_segmenter()
            chat_model = spec.build_chat_model()
            agent = Sam3Agent(segmenter, chat_model, config)
            videos = None
            if demo.video:
                from sam3_agent.agent.video.agent import Sam3VideoAgent
                from sam3_agent.apps.demo.sessions import VideoDemoRunner

                def build_video_agent() -> Sam3VideoAgent:
                    # On the first video request: a demo used for images never loads it.
                    return Sam3VideoAgent(spec.build_video_segmenter(), chat_model, config)

                videos = VideoDemoRunner(build_video_agent, demo.out, limits)
            app = create_app(
                DemoRunner(agent, demo.out),
                token=demo.token or None,
                concurrency=demo.concurrency,
                service_segmenter=segmenter if demo.serve_sam3_api else None,
                examples=bundled_examples(),
                video_runner=videos,
            )
        say(f"demo on http://{demo.host}:{demo.port}/ (Ctrl+C to stop)")
        serve(app, host=demo.host, port=demo.port, log_level="debug" if verbose else "warning")


@with_flags(MCP, BACKENDS, AGENT, DOWNLOADS, VERBOSE)
def mcp_command(
    *,
    mcp: McpFlags,
    backends: BackendSpec,
    config: AgentConfig,
    max_download_mb: int,
    verbose: bool,
) -> None:
    """Serve the agent to MCP clients (tools segment, track, segment_phrase), over stdio.

    With --http HOST:PORT, over streamable HTTP at http://HOST:PORT/mcp. Messages: stderr.

    Exit codes: 0 stdio closed or Ctrl+C, 1 a model or the server failed, 2 a bad flag.
    """
    if mcp.host is not None:  # a server says when it is up
        logging.getLogger().setLevel(logging.DEBUG if verbose else logging.INFO)
    with one_line_errors():
        if importlib.util.find_spec("mcp") is None:
            raise UserError('sam3-agent mcp needs the mcp package: pip install "sam3-agent[mcp]"')
        spec = plan_server(backends, config, mcp.out)  # before any download

        from sam3_agent.apps.mcp.runner import McpRunner
        from sam3_agent.apps.mcp.server import create_server, serve_http, serve_stdio

        say("loading models...")
        runner = McpRunner(
            spec, config, mcp.out, max_concurrent=mcp.max_concurrent,
            max_download_mb=max_download_mb,
        )  # fmt: skip
        server = create_server(runner)
        if mcp.host is None or mcp.port is None:
            say("MCP server on stdio: tools segment, track, segment_phrase")
            serve_stdio(server)
        else:
            say(f"MCP server on http://{mcp.host}:{mcp.port}/mcp (Ctrl+C to stop)")
            log_level = "debug" if verbose else "warning"
            serve_http(server, host=mcp.host, port=mcp.port, token=mcp.token, log_level=log_level)
