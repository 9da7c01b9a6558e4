"""``sam3-agent demo``: the web page where the agent segments round by round.

Takes the backend and agent flags of ``run``; ``gradio`` is imported only when the command
runs, after every flag was checked.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, setup_logging
from sam3_agent.apps.cli.options import (
    BackendOptions,
    CacheOpt,
    CheckConcurrencyOpt,
    ContextPolicyOpt,
    DeviceOpt,
    DtypeOpt,
    LlmApiKeyOpt,
    LlmExtraOpt,
    LlmModelOpt,
    LlmOpt,
    LlmTimeoutOpt,
    LlmUrlOpt,
    MaxContextTokensOpt,
    MaxCorrectionsOpt,
    MaxImageSideOpt,
    MaxRoundsOpt,
    MaxTokensOpt,
    MemoryCheckOpt,
    PromptsOpt,
    ReplayOpt,
    Sam3ModelOpt,
    Sam3TokenOpt,
    Sam3UrlOpt,
    ScoreThresholdOpt,
    SeedOpt,
    TemperatureOpt,
    ToolProtocolOpt,
    check_context_backend,
    config_from_flags,
    plan_models,
)
from sam3_agent.apps.service.server import is_loopback
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError

DEMO = "Demo server"
DEMO_TOKEN_ENV = "SAM3_AGENT_DEMO_TOKEN"


def check_demo_flags(host: str, port: int, token: str | None, concurrency: int) -> None:
    """Refuse what cannot work before anything loads.

    Raises:
        UserError: gradio missing, a port out of range, a bound below 1, or a non-loopback
            ``host`` without a token.
    """
    if importlib.util.find_spec("gradio") is None:
        # No brackets: the console reads them as markup.
        raise UserError('the demo needs gradio: pip install gradio (the "demo" extra)')
    if not 1 <= port <= 65535:
        raise UserError(f"--port must be in 1..65535, got {port}")
    if concurrency < 1:
        raise UserError(f"--concurrency must be >= 1, got {concurrency}")
    if not is_loopback(host) and not token:
        raise UserError(
            f"refusing to serve the demo on {host} without a token: anyone who can reach it "
            f"could spend your GPU and tokens. Pass --token or set {DEMO_TOKEN_ENV}, or "
            "listen on 127.0.0.1."
        )


def demo_command(
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on. Anything but loopback requires a token.",
            rich_help_panel=DEMO,
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", rich_help_panel=DEMO)] = 7860,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=DEMO_TOKEN_ENV,
            help="Password of the page (any user name), and bearer token of the SAM 3 API "
            "with --serve-sam3-api. Required unless listening on loopback.",
            rich_help_panel=DEMO,
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Each request writes its files under here.", rich_help_panel=DEMO
        ),
    ] = Path("runs/demo"),
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            help="Requests that run at the same time; the others wait in a queue.",
            rich_help_panel=DEMO,
        ),
    ] = 2,
    serve_sam3_api: Annotated[
        bool,
        typer.Option(
            "--serve-sam3-api",
            help="Also serve the SAM 3 service's API (/health, /v1/*, as serve-sam3 does) on "
            "this process's segmenter.",
            rich_help_panel=DEMO,
        ),
    ] = False,
    sam3: Sam3ModelOpt = DEFAULT_SAM3_MODEL,
    sam3_url: Sam3UrlOpt = None,
    sam3_token: Sam3TokenOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    llm: LlmOpt = None,
    llm_url: LlmUrlOpt = None,
    llm_model: LlmModelOpt = None,
    llm_api_key: LlmApiKeyOpt = None,
    llm_timeout: LlmTimeoutOpt = 120.0,
    temperature: TemperatureOpt = None,
    max_tokens: MaxTokensOpt = None,
    seed: SeedOpt = None,
    llm_extra: LlmExtraOpt = None,
    memory_check: MemoryCheckOpt = True,
    tool_protocol: ToolProtocolOpt = "tags",
    cache: CacheOpt = None,
    replay: ReplayOpt = False,
    max_rounds: MaxRoundsOpt = AgentConfig.max_rounds,
    max_corrections: MaxCorrectionsOpt = AgentConfig.max_corrections,
    check_concurrency: CheckConcurrencyOpt = AgentConfig.check_concurrency,
    score_threshold: ScoreThresholdOpt = AgentConfig.score_threshold,
    max_image_side: MaxImageSideOpt = AgentConfig.max_image_side,
    context_policy: ContextPolicyOpt = AgentConfig.context_policy,
    max_context_tokens: MaxContextTokensOpt = AgentConfig.max_context_tokens,
    prompts: PromptsOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Serve a web page: upload an image, say what to segment, watch each round."""
    setup_logging(verbose)
    with one_line_errors():
        check_demo_flags(host, port, token, concurrency)
        config = config_from_flags(
            max_rounds=max_rounds,
            max_corrections=max_corrections,
            check_concurrency=check_concurrency,
            score_threshold=score_threshold,
            max_image_side=max_image_side,
            tool_protocol=tool_protocol,
            prompts_dir=prompts,
            context_policy=context_policy,
            max_context_tokens=max_context_tokens,
        )
        backends = BackendOptions(
            sam3=sam3,
            sam3_url=sam3_url,
            sam3_token=sam3_token,
            device=device,
            dtype=dtype,
            llm=llm,
            llm_url=llm_url,
            llm_model=llm_model,
            llm_api_key=llm_api_key,
            llm_timeout=llm_timeout,
            tool_protocol=tool_protocol,
            cache=cache,
            replay=replay,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            llm_extra=llm_extra,
        )
        backends.validate()
        check_context_backend(config, backends)
        # Which default MLLM, and do the models fit: before any download.
        plan = plan_models(backends, chat=True, memory_check=memory_check)
        backends = plan.backends
        if plan.note:
            err_console.print(plan.note, markup=False)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the output directory {out}: {e}") from e

        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.apps.demo.server import bundled_examples, create_app, serve
        from sam3_agent.apps.demo.sessions import DemoRunner

        with err_console.status("loading models..."):
            segmenter = backends.build_segmenter()
            chat_model = backends.build_chat_model()
            agent = Sam3Agent(segmenter, chat_model, config)
            app = create_app(
                DemoRunner(agent, out),
                token=token or None,
                concurrency=concurrency,
                service_segmenter=segmenter if serve_sam3_api else None,
                examples=bundled_examples(),
            )
        err_console.print(f"demo on http://{host}:{port}/ (Ctrl+C to stop)", soft_wrap=True)
        serve(app, host=host, port=port, log_level="debug" if verbose else "warning")
