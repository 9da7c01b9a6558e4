"""``sam3-agent demo``: the web page where the agent segments round by round.

Takes the backend, agent and context flags of ``run``; ``gradio`` is imported only when the
command runs, after every flag was checked.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, plain, say
from sam3_agent.apps.cli.flags import AGENT, BACKENDS, VERBOSE, check_agent, with_flags
from sam3_agent.apps.cli.setting_flags import as_flags
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError

DEMO = "Demo server"
DEMO_TOKEN_ENV = "SAM3_AGENT_DEMO_TOKEN"


def check_demo_flags(host: str, port: int, token: str | None, concurrency: int) -> None:
    """Refuse what cannot work before anything loads.

    Raises:
        UserError: gradio missing, a port out of range or in use, a bound below 1, or a
            non-loopback ``host`` without a token.
    """
    if importlib.util.find_spec("gradio") is None:
        raise UserError('the demo needs gradio: pip install "sam3-agent[demo]" (or gradio)')
    if not 1 <= port <= 65535:
        raise UserError(f"--port must be in 1..65535, got {port}")
    if concurrency < 1:
        raise UserError(f"--concurrency must be >= 1, got {concurrency}")
    check_bind_security(
        host, token, serving="serve the demo", token_env=DEMO_TOKEN_ENV,
        spends="spend your GPU and tokens",
    )  # fmt: skip
    check_port_free(host, port)


def _demo(*names: str, help: str, **kwargs: object) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, rich_help_panel=DEMO, **kwargs)  # type: ignore[arg-type]


@with_flags(BACKENDS, AGENT, VERBOSE)
def demo_command(
    host: Annotated[
        str,
        _demo(
            "--host",
            metavar="HOST",
            help="Address to listen on. Anything but loopback requires a token.",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, _demo("--port", metavar="PORT", help="Port to listen on.")] = 7860,
    token: Annotated[
        str | None,
        _demo(
            "--token",
            metavar="TOKEN",
            envvar=DEMO_TOKEN_ENV,
            help="Password of the page (any user name), and bearer token of the SAM 3 API "
            "with --serve-sam3-api. Required unless listening on loopback.",
        ),
    ] = None,
    out: Annotated[
        Path, _demo("--out", "-o", metavar="DIR", help="Each request writes its files under here.")
    ] = Path("runs/demo"),
    concurrency: Annotated[
        int,
        _demo(
            "--concurrency",
            metavar="N",
            help="Requests that run at the same time; the others wait in a queue.",
        ),
    ] = 2,
    serve_sam3_api: Annotated[
        bool,
        _demo(
            "--serve-sam3-api",
            metavar="",
            help="Also serve the SAM 3 service's API (/health, /v1/*, as serve-sam3 does) on "
            "this process's segmenter.",
        ),
    ] = False,
    video: Annotated[
        bool,
        _demo(
            "--video/--no-video",
            metavar="",
            help="A video tab beside the image one; SAM 3's video model loads on the first "
            "video request.",
        ),
    ] = True,
    max_video_mb: Annotated[
        float, _demo("--max-video-mb", metavar="MB", help="Largest video upload, in megabytes.")
    ] = VideoLimits.max_mb,
    max_video_frames: Annotated[
        int,
        _demo(
            "--max-video-frames",
            metavar="N",
            help="Most frames one video request tracks (after its stride); a longer clip is "
            "refused with the stride that fits.",
        ),
    ] = VideoLimits.max_frames,
    *,
    backends: BackendSpec,
    config: AgentConfig,
    verbose: bool,
) -> None:
    """Serve a web page: upload an image or a video, say what to segment, watch each round.

    Exit codes: 0 stopped (Ctrl+C), 1 a model could not load or the server failed,
    2 a bad flag, an unsafe --host without a token, or a port in use.
    """
    with one_line_errors():
        check_demo_flags(host, port, token, concurrency)
        limits = VideoLimits(max_video_mb, max_video_frames, config.max_image_pixels)
        backends.validate()
        check_agent(config, backends)
        # Which default MLLM, and do the models fit: before any download.
        plan = backends.plan()
        if plan.note:
            say(as_flags(plan.note))
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the output directory {out}: {e}") from e

        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.apps.demo.server import bundled_examples, create_app, serve
        from sam3_agent.apps.demo.sessions import DemoRunner

        with err_console.status(plain("loading models...")):
            segmenter = plan.spec.build_segmenter()
            chat_model = plan.spec.build_chat_model()
            agent = Sam3Agent(segmenter, chat_model, config)
            videos = None
            if video:
                from sam3_agent.agent.video.agent import Sam3VideoAgent
                from sam3_agent.apps.demo.video import VideoDemoRunner

                def build_video_agent() -> Sam3VideoAgent:
                    # On the first video request: a demo used for images never loads it.
                    return Sam3VideoAgent(plan.spec.build_video_segmenter(), chat_model, config)

                videos = VideoDemoRunner(build_video_agent, out, limits)
            app = create_app(
                DemoRunner(agent, out),
                token=token or None,
                concurrency=concurrency,
                service_segmenter=segmenter if serve_sam3_api else None,
                examples=bundled_examples(),
                video_runner=videos,
            )
        say(f"demo on http://{host}:{port}/ (Ctrl+C to stop)")
        serve(app, host=host, port=port, log_level="debug" if verbose else "warning")
