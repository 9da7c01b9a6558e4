"""``sam3-agent run IMAGE QUERY``: one request, with a live status line per round."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.agent import RoundEvent, Sam3Agent, check_query
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.checkpoint import check_resumable
from sam3_agent.cli.console import err_console, one_line_errors, setup_logging
from sam3_agent.cli.options import (
    BackendOptions,
    CacheOpt,
    CheckConcurrencyOpt,
    DeviceOpt,
    DtypeOpt,
    LlmApiKeyOpt,
    LlmModelOpt,
    LlmOpt,
    LlmTimeoutOpt,
    LlmUrlOpt,
    MaxCorrectionsOpt,
    MaxImageSideOpt,
    MaxRoundsOpt,
    ReplayOpt,
    Sam3ModelOpt,
    Sam3TokenOpt,
    Sam3UrlOpt,
    ScoreThresholdOpt,
    ToolProtocolOpt,
    config_from_flags,
)
from sam3_agent.errors import UserError
from sam3_agent.images import load_image
from sam3_agent.outputs import safe_name

EXIT_FAILED_SESSION = 3


def default_out_dir(image: Path, query: str) -> Path:
    """``runs/<time>-<image stem>-<query>``: a fresh directory per run."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / safe_name(f"{stamp}-{image.stem}-{query}", max_len=80)


def run_command(
    image: Annotated[Path, typer.Argument(help="The image (JPEG, PNG, ...).")],
    query: Annotated[str, typer.Argument(help='What to segment, e.g. "the leftmost child".')],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Output directory (default: runs/<time>-<image>-<query>)."
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
    tool_protocol: ToolProtocolOpt = "tags",
    cache: CacheOpt = None,
    replay: ReplayOpt = False,
    max_rounds: MaxRoundsOpt = 100,
    max_corrections: MaxCorrectionsOpt = 10,
    check_concurrency: CheckConcurrencyOpt = 8,
    score_threshold: ScoreThresholdOpt = 0.5,
    max_image_side: MaxImageSideOpt = 1024,
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
    with one_line_errors():
        # Bad input fails now, not after minutes of loading models.
        check_query(query)
        pixels = load_image(image)
        config = config_from_flags(
            max_rounds=max_rounds,
            max_corrections=max_corrections,
            check_concurrency=check_concurrency,
            score_threshold=score_threshold,
            max_image_side=max_image_side,
            tool_protocol=tool_protocol,
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
        )
        if resume is not None:  # refuse a different request before any model loads
            if out is not None and out.resolve() != resume.resolve():
                raise UserError("--resume continues the session in its own directory; drop --out")
            done = check_resumable(resume, query=query, image=pixels, config=config)
            err_console.print(f"resuming {resume} after round {done}", soft_wrap=True)
            out = resume
        out_dir = out or default_out_dir(image, query)
        with err_console.status("loading models...") as status:
            segmenter = backends.build_segmenter()
            chat_model = backends.build_chat_model()
            agent = Sam3Agent(segmenter, chat_model, config)
            status.update(f"round 1: asking {chat_model.name}...")

            def on_round(event: RoundEvent) -> None:
                tool = event.tool or "(no tool)"
                err_console.print(f"round {event.round}: {tool} - {event.summary}", soft_wrap=True)
                status.update(f"round {event.round + 1}: asking {chat_model.name}...")

            result = agent.run(
                image, query, output_dir=out_dir, on_round=on_round, resume=resume is not None
            )

    document = result.to_json()
    if json_output:
        typer.echo(json.dumps(document, indent=2))
    summary = {
        "masks": f"[green]{len(result.detections)} mask(s)[/green]",
        "no_mask": "[yellow]no mask[/yellow] (the model found nothing matching)",
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
