"""``sam3-agent run IMAGE QUERY``: one request, with a live status line per round.

Every flag and path is checked before any model loads (and before numpy, torch or the
HTTP clients are imported); the agent and the backends are imported only to run.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    MaxPixelsOpt,
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
from sam3_agent.apps.cli.outdir import check_run_dir, claim_default_run_dir, clear_run_dir
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.values.config import DEFAULT_MAX_PIXELS, AgentConfig
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.agent.export import ExportFormat
    from sam3_agent.agent.result import AgentResult
    from sam3_agent.values.images import RGBImage

EXIT_FAILED_SESSION = 3


class RunMode(str, Enum):
    agent = "agent"
    sam3_only = "sam3-only"


def run_command(
    image: Annotated[Path, typer.Argument(help="The image (JPEG, PNG, ...).")],
    query: Annotated[str, typer.Argument(help='What to segment, e.g. "the leftmost child".')],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Output directory (default: runs/<time>-<image>-<query>)."
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace a previous run's files in --out (nothing else)."),
    ] = False,
    mode: Annotated[
        RunMode,
        typer.Option(
            "--mode",
            help="agent: the MLLM drives SAM 3; sam3-only: SAM 3 alone with the query as "
            "its phrase (every mask above the threshold, no MLLM).",
        ),
    ] = RunMode.agent,
    export: Annotated[
        str | None,
        typer.Option(
            "--export",
            help="Also write per-mask files: png (masks/NN.png, binary), polygons (in "
            "result.json); comma-separated.",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print result.json to stdout.")
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
    context_policy: ContextPolicyOpt = AgentConfig.context_policy,
    max_context_tokens: MaxContextTokensOpt = AgentConfig.max_context_tokens,
    max_image_side: MaxImageSideOpt = AgentConfig.max_image_side,
    prompts: PromptsOpt = None,
    max_pixels: MaxPixelsOpt = DEFAULT_MAX_PIXELS,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue the interrupted session in this run directory, from its last "
            "committed round (give the same IMAGE, QUERY and agent flags).",
        ),
    ] = None,
) -> None:
    """Segment what QUERY describes in IMAGE; write result.json, overlay.png, trace.jsonl.

    Exit codes: 0 masks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json).
    """
    setup_logging(verbose)
    sam3_only = mode is RunMode.sam3_only
    with one_line_errors():
        # Every flag and path first: a refusal must not cost minutes of loading models.
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
        backends.validate(chat=not sam3_only)
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
            max_image_pixels=max_pixels,
        )
        if not sam3_only:
            check_context_backend(config, backends)
        if resume is not None:  # the directory holds the session: not cleared, not claimed
            if out is not None and out.resolve() != resume.resolve():
                raise UserError("--resume continues the session in its own directory; drop --out")
            if sam3_only:
                raise UserError("--resume continues an agent session; not with --mode sam3-only")
        elif out is not None:
            check_run_dir(out, overwrite=overwrite)

        from sam3_agent.agent.export import parse_exports
        from sam3_agent.agent.loop import check_query
        from sam3_agent.agent.rundir import result_document
        from sam3_agent.values.files import safe_name
        from sam3_agent.values.images import load_image

        formats = parse_exports(export)
        check_query(query)
        pixels = load_image(image, max_pixels=config.max_image_pixels)
        if resume is not None:  # refuse a different request before any model loads
            from sam3_agent.agent.checkpoint import check_resumable

            done = check_resumable(resume, query=query, image=pixels, config=config)
            err_console.print(f"resuming {resume} after round {done}", soft_wrap=True)
        # Which default MLLM, and do the models fit: before any download, any directory.
        plan = plan_models(backends, chat=not sam3_only, memory_check=memory_check)
        backends = plan.backends
        if plan.note:
            err_console.print(plan.note, markup=False)
        # Only now is anything written: a bad image leaves no output directory behind.
        if resume is not None:
            out_dir = resume
        elif out is None:
            out_dir = claim_default_run_dir(safe_name(f"{image.stem}-{query}", max_len=64))
        else:
            clear_run_dir(out)
            out_dir = out
        # The decoded pixels go on: one decode; the run writes result.json once, exports in.
        if sam3_only:
            result = _run_sam3_only(backends, pixels, image, query, config, out_dir, formats)
        else:
            result = _run_agent(
                backends, pixels, image, query, config, out_dir, formats, resume=resume is not None
            )

    if json_output:
        typer.echo(json.dumps(result_document(result, formats), indent=2))
    summary = {
        "masks": f"[green]{len(result.detections)} mask(s)[/green]",
        "no_mask": "[yellow]no mask[/yellow] (nothing matching was found)",
        "failed": f"[red]failed[/red]: {result.failure}",
    }[result.status]
    usage = result.usage.total
    err_console.print(
        f"{summary} in {result.rounds} round(s), {usage.total_tokens} tokens, "
        f"{result.timings['total']:.1f} s -> {out_dir}",
        soft_wrap=True,
    )
    if result.status == "failed":
        raise typer.Exit(EXIT_FAILED_SESSION)


def _run_agent(
    backends: BackendOptions,
    pixels: RGBImage,
    image: Path,
    query: str,
    config: AgentConfig,
    out_dir: Path,
    exports: frozenset[ExportFormat],
    *,
    resume: bool = False,
) -> AgentResult:
    from sam3_agent.agent.loop import RoundEvent, Sam3Agent

    with err_console.status("loading models...") as status:
        segmenter = backends.build_segmenter()
        chat_model = backends.build_chat_model()
        agent = Sam3Agent(segmenter, chat_model, config)
        status.update(f"round 1: asking {chat_model.name}...")

        def on_round(event: RoundEvent) -> None:
            tool = event.tool or "(no tool)"
            err_console.print(f"round {event.round}: {tool} - {event.summary}", soft_wrap=True)
            status.update(f"round {event.round + 1}: asking {chat_model.name}...")

        return agent.run(
            pixels,
            query,
            output_dir=out_dir,
            on_round=on_round,
            resume=resume,
            exports=exports,
            image_path=image,
        )


def _run_sam3_only(
    backends: BackendOptions,
    pixels: RGBImage,
    image: Path,
    query: str,
    config: AgentConfig,
    out_dir: Path,
    exports: frozenset[ExportFormat],
) -> AgentResult:
    from sam3_agent.agent.sam3_only import segment_only

    with err_console.status("loading SAM 3...") as status:
        segmenter = backends.build_segmenter()
        status.update(f"segmenting {query!r}...")
        return segment_only(
            segmenter,
            pixels,
            query,
            config=config,
            output_dir=out_dir,
            exports=exports,
            image_path=image,
        )
