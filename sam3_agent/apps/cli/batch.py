"""``sam3-agent batch INPUT --out DIR``: many requests, resumable, on the local engine or Ray.

Registered in :mod:`sam3_agent.apps.cli.main` as the ``batch`` row of ``COMMANDS``. Like ``eval``,
every flag and path is checked before any model loads, and the module imports nothing heavy
(the batch and engine modules are imported when the command runs).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from sam3_agent.apps.cli.console import err_console, one_line_errors, setup_logging
from sam3_agent.apps.cli.engine_options import (
    EngineChoice,
    EngineOpt,
    GpusPerWorkerOpt,
    RayAddressOpt,
    WorkersOpt,
    engine_options,
)
from sam3_agent.apps.cli.options import (
    BackendOptions,
    CacheOpt,
    CheckConcurrencyOpt,
    DeviceOpt,
    DtypeOpt,
    LlmApiKeyOpt,
    LlmExtraOpt,
    LlmModelOpt,
    LlmOpt,
    LlmTimeoutOpt,
    LlmUrlOpt,
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
    check_writable_dir,
    config_from_flags,
    plan_models,
)
from sam3_agent.apps.cli.progress import make_progress
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY
from sam3_agent.runs.jobs.models import require_chat_model_name
from sam3_agent.values.config import DEFAULT_MAX_PIXELS, AgentConfig

if TYPE_CHECKING:
    from sam3_agent.runs.batch.results import RequestResult
    from sam3_agent.runs.batch.summary import BatchTotals

INPUT = "Input"
RUN = "Run"


class BatchTally:
    """Requests by outcome, for the progress display."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, result: RequestResult) -> None:
        self.counts[result.status] += 1

    def text(self) -> str:
        c = self.counts
        return f"masks {c['masks']}  no mask {c['no_mask']}  failed {c['failed']}"


def _print_totals(totals: BatchTotals, out: Path) -> None:
    from sam3_agent.runs.batch.summary import SUMMARY_NAME

    table = Table(title=f"batch {out}", show_edge=False)
    for column in ("requests", "masks", "no mask", "failed", "missing", "tokens", "time (s)"):
        table.add_column(column, justify="right")
    s = totals.by_status
    table.add_row(
        str(totals.requests),
        str(s["masks"]),
        str(s["no_mask"]),
        str(s["failed"]),
        str(totals.missing),
        str(totals.prompt_tokens + totals.completion_tokens),
        f"{totals.time_s:.1f}",
    )
    console = Console(highlight=False)
    console.print(table)
    console.print(f"summary: {out / SUMMARY_NAME}")


def batch_command(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="INPUT",
            help="A .jsonl or .csv file (image, query, optional id) or a folder of images.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Run directory: results.sqlite, DIR/<id>/ per request, summary.jsonl.",
            rich_help_panel=RUN,
        ),
    ],
    query: Annotated[
        str | None,
        typer.Option(
            "--query", help="The query for every image of a folder INPUT.", rich_help_panel=INPUT
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            min=1,
            help="Requests in flight at once (per worker with --engine ray).",
            rich_help_panel=RUN,
        ),
    ] = DEFAULT_CONCURRENCY,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Run again the requests stored as infrastructure failures.",
            rich_help_panel=RUN,
        ),
    ] = False,
    progress: Annotated[
        bool,
        typer.Option(
            "--progress/--no-progress", help="Progress bar on stderr.", rich_help_panel=RUN
        ),
    ] = True,
    engine: EngineOpt = EngineChoice.local,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusPerWorkerOpt = 0.0,
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
    prompts: PromptsOpt = None,
    max_pixels: MaxPixelsOpt = DEFAULT_MAX_PIXELS,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the agent on many requests; rerun the same command to resume after a stop.

    Each request's result.json, overlay.png and trace.jsonl go to DIR/<id>/, and
    DIR/summary.jsonl lists every request's outcome.

    Exit codes: 0 done (failed requests are counted, not fatal), 1 backend error,
    2 bad input, 130 interrupted (finished requests are kept).
    """
    setup_logging(verbose)
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
    with one_line_errors():
        try:
            # Every flag and path first: a refusal must not cost minutes of loading models.
            backends.validate()
            check_writable_dir(out, "--out")
            engine_opts = engine_options(
                engine=engine,
                concurrency=concurrency,
                ray_address=ray_address,
                workers=workers,
                gpus_per_worker=gpus_per_worker,
            )
            require_chat_model_name(backends, engine_opts.engine)
            agent_config = config_from_flags(
                max_rounds=max_rounds,
                max_corrections=max_corrections,
                check_concurrency=check_concurrency,
                score_threshold=score_threshold,
                max_image_side=max_image_side,
                tool_protocol=tool_protocol,
                prompts_dir=prompts,
                max_image_pixels=max_pixels,
            )
            from sam3_agent.runs.batch.requests import load_requests

            requests = load_requests(source, query=query)
            # Which default MLLM, and do the models fit: before any download. Only where they
            # load here: Ray workers load them on machines whose memory this one cannot see
            # (and there the flags name the MLLM, checked above).
            if engine_opts.engine == "local":
                plan = plan_models(backends, memory_check=memory_check)
                backends = plan.backends
                if plan.note:
                    err_console.print(plan.note, markup=False)
            from sam3_agent.runs.batch.run import run_batch

            bar = make_progress(err_console, "batch", BatchTally()) if progress else None
            try:
                done = run_batch(
                    requests,
                    out,
                    backends,
                    config=agent_config,
                    engine=engine_opts,
                    retry_failed=retry_failed,
                    progress=bar,
                )
            finally:
                if bar is not None:
                    bar.stop()
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]interrupted[/yellow]: finished requests are kept in {out}; "
                "run the same command to resume.",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    outcome = done.run
    err_console.print(
        f"{outcome.ran} run, {outcome.skipped} already stored, {outcome.failed} failed",
    )
    _print_totals(done.totals, out)


__all__ = ["batch_command"]
