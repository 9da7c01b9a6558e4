"""``sam3-agent demo``: the web page where the agent segments round by round (``gradio``
imported only once every flag was checked)."""

from __future__ import annotations

from sam3_agent.apps.cli.console import err_console, one_line_errors, plain, say
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, plan_server
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.servers import DEMO, DemoFlags, check_demo_flags
from sam3_agent.apps.demo.limits import VideoLimits
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig


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
