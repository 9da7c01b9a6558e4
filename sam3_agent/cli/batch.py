"""``sam3-agent batch INPUT --out DIR``: many requests, resumable, on the local engine or Ray.

Registered in :mod:`sam3_agent.cli.main` as ``app.command("batch")(batch_command)``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.batch.requests import BatchRequest, load_requests
from sam3_agent.batch.summary import SUMMARY_NAME, BatchTotals, write_summary
from sam3_agent.cli.console import err_console, one_line_errors, setup_logging
from sam3_agent.cli.engine_options import (
    EngineChoice,
    EngineOpt,
    GpusPerWorkerOpt,
    RayAddressOpt,
    WorkersOpt,
    engine_options,
)
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
from sam3_agent.cli.workers import BatchWorkerFactory, require_model_name
from sam3_agent.config import AgentConfig
from sam3_agent.engines.base import DEFAULT_CONCURRENCY, EngineOptions, build_engine
from sam3_agent.engines.driver import RunOutcome, run_jobs
from sam3_agent.evaluation.store import ResultStore, SampleResult

INPUT = "Input"
RUN = "Run"

# Settings that change no answer, so a resumed batch may change them freely.
_NOT_IDENTITY = ("check_concurrency",)


class _ProgressBar:
    """A rich progress bar on stderr counting requests by outcome."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console,
        )
        self._task: TaskID | None = None
        self._counts: Counter[str] = Counter()

    def _stats(self) -> str:
        c = self._counts
        return f"masks {c['masks']}  no mask {c['no_mask']}  failed {c['failed']}"

    def start(self, total: int, already_done: Sequence[SampleResult]) -> None:
        self._counts.update(r.status for r in already_done)
        self._progress.start()
        self._task = self._progress.add_task(
            "batch", total=total, completed=len(already_done), stats=self._stats()
        )

    def update(self, result: SampleResult) -> None:
        self._counts[result.status] += 1
        if self._task is not None:
            self._progress.update(self._task, advance=1, stats=self._stats())

    def stop(self) -> None:
        self._progress.stop()


def _print_totals(totals: BatchTotals, out: Path) -> None:
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
    tool_protocol: ToolProtocolOpt = "tags",
    cache: CacheOpt = None,
    replay: ReplayOpt = False,
    max_rounds: MaxRoundsOpt = AgentConfig.max_rounds,
    max_corrections: MaxCorrectionsOpt = AgentConfig.max_corrections,
    check_concurrency: CheckConcurrencyOpt = AgentConfig.check_concurrency,
    score_threshold: ScoreThresholdOpt = AgentConfig.score_threshold,
    max_image_side: MaxImageSideOpt = AgentConfig.max_image_side,
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
    )
    bar = _ProgressBar(err_console) if progress else None
    with one_line_errors():
        try:
            agent_config = config_from_flags(
                max_rounds=max_rounds,
                max_corrections=max_corrections,
                check_concurrency=check_concurrency,
                score_threshold=score_threshold,
                max_image_side=max_image_side,
                tool_protocol=tool_protocol,
            )
            engine_opts = engine_options(
                engine=engine,
                concurrency=concurrency,
                ray_address=ray_address,
                workers=workers,
                gpus_per_worker=gpus_per_worker,
            )
            requests = load_requests(source, query=query)
            outcome, totals = _run(
                requests,
                out=out,
                backends=backends,
                agent_config=agent_config,
                engine_opts=engine_opts,
                retry_failed=retry_failed,
                bar=bar,
            )
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]interrupted[/yellow]: finished requests are kept in {out}; "
                "run the same command to resume.",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    err_console.print(
        f"{outcome.evaluated} run, {outcome.skipped} already stored, {outcome.failed} failed",
    )
    _print_totals(totals, out)


def _run(
    requests: list[BatchRequest],
    *,
    out: Path,
    backends: BackendOptions,
    agent_config: AgentConfig,
    engine_opts: EngineOptions,
    retry_failed: bool,
    bar: _ProgressBar | None,
) -> tuple[RunOutcome, BatchTotals]:
    # The model's name is part of the run's identity; checked before any model loads when
    # the flags say it (always with Ray: nothing loads on the driver).
    model_name = require_model_name(backends, engine_opts.engine)
    chat_model = None
    if model_name is None:
        chat_model = backends.build_chat_model()
        model_name = chat_model.name
    settings = {k: v for k, v in agent_config.to_dict().items() if k not in _NOT_IDENTITY}
    config: dict[str, Any] = {
        "command": "batch",
        "model": model_name,
        "sam3": backends.sam3_url or backends.sam3,
        "agent": settings,
    }
    with ResultStore.create_or_resume(out, config) as store:
        store.set_planned(len(requests))
        factory = BatchWorkerFactory(backends, agent_config, chat_model=chat_model)
        try:
            outcome = asyncio.run(
                run_jobs(
                    requests,
                    store,
                    build_engine(engine_opts),
                    factory,
                    progress=bar,
                    retry_failed=retry_failed,
                )
            )
        finally:
            if bar is not None:
                bar.stop()
        totals = write_summary(out, requests, store.results())
    return outcome, totals


__all__ = ["batch_command"]
