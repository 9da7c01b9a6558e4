"""``sam3-agent eval`` and ``sam3-agent report``: batch evaluation on published datasets.

Registered in :mod:`sam3_agent.apps.cli.main` as ``app.command("eval")(eval_command)`` and
``app.command("report")(report_command)``.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, out_console, setup_logging
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
    check_writable_dir,
    config_from_flags,
    plan_models,
)
from sam3_agent.apps.cli.progress import make_progress
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.runs.evaluation.presets import PRESETS, apply_preset, get_preset
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY
from sam3_agent.runs.jobs.models import require_chat_model_name
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.runs.evaluation.report import ReportFiles
    from sam3_agent.runs.evaluation.results import SampleResult

logger = logging.getLogger(__name__)

DATA = "Dataset"
RUN = "Run"


class DatasetChoice(str, Enum):
    reasonseg = "reasonseg"
    refcoco = "refcoco"
    refcoco_plus = "refcoco+"
    refcocog = "refcocog"
    grefcoco = "grefcoco"


PresetChoice = Enum(  # type: ignore[misc]  # the values come from the presets' data
    "PresetChoice", {name: name for name in PRESETS}, type=str
)


class ModeChoice(str, Enum):
    agent = "agent"
    sam3_only = "sam3-only"


class EvalTally:
    """Running gIoU / cIoU and failures, for the progress display."""

    def __init__(self) -> None:
        from sam3_agent.runs.evaluation.metrics import RunningMetrics

        self.running: Any = RunningMetrics()

    def add(self, result: SampleResult) -> None:
        self.running.add(result.scored())

    def text(self) -> str:
        running = self.running
        giou = "–" if running.giou is None else f"{100 * running.giou:.1f}"
        ciou = "–" if running.ciou is None else f"{100 * running.ciou:.1f}"
        return f"gIoU {giou}  cIoU {ciou}  failed {running.failed}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _print_summary(files: ReportFiles) -> None:
    for m in files.methods:
        overall = m.metrics.overall
        out_console.print(
            f"{m.label}: {overall.count} samples, gIoU {_pct(overall.giou)}, "
            f"cIoU {_pct(overall.ciou)}, failed {overall.failed}",
        )
    out_console.print(f"report: {files.report_md}")


def eval_command(
    root: Annotated[Path, typer.Option("--root", help="Dataset directory.", rich_help_panel=DATA)],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Run directory: results, per-sample artifacts, report.",
            rich_help_panel=RUN,
        ),
    ],
    dataset: Annotated[
        DatasetChoice | None,
        typer.Option("--dataset", help="Dataset format.", rich_help_panel=DATA),
    ] = None,
    preset: Annotated[
        PresetChoice | None,
        typer.Option(
            "--preset",
            help="One of the SAM 3 paper's evaluations: sets --dataset, --split and --mode "
            "(the README lists them).",
            rich_help_panel=DATA,
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="Split to evaluate (default: val).", rich_help_panel=DATA),
    ] = None,
    images: Annotated[
        Path | None,
        typer.Option(
            "--images",
            help="COCO train2014 image directory (refer datasets; found under --root if omitted).",
            rich_help_panel=DATA,
        ),
    ] = None,
    all_texts: Annotated[
        bool,
        typer.Option(
            "--all-texts",
            help="ReasonSeg: evaluate every text of an image, not only the first.",
            rich_help_panel=DATA,
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N samples (in dataset order).",
            rich_help_panel=DATA,
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="i/n: evaluate shard i (0-based) of n; split by image, stable across runs.",
            rich_help_panel=RUN,
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            min=1,
            help="Samples evaluated at the same time (per worker with --engine ray).",
            rich_help_panel=RUN,
        ),
    ] = DEFAULT_CONCURRENCY,
    mode: Annotated[
        ModeChoice | None,
        typer.Option(
            "--mode",
            help="agent: MLLM + SAM 3 (default); sam3-only: SAM 3 with the raw query as phrase.",
            rich_help_panel=RUN,
        ),
    ] = None,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Evaluate again the samples stored as infrastructure failures.",
            rich_help_panel=RUN,
        ),
    ] = False,
    progress: Annotated[
        bool,
        typer.Option(
            "--progress/--no-progress", help="Progress bar on stderr.", rich_help_panel=RUN
        ),
    ] = True,
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
    # Engine flags (shared with `batch`, see cli/engine_options.py).
    engine: EngineOpt = EngineChoice.local,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusPerWorkerOpt = 0.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Evaluate on a dataset; rerun the same command to resume after a stop.

    Exit codes: 0 done (failed samples are counted, not fatal), 1 backend error,
    2 bad input or dataset, 130 interrupted (finished samples are kept).
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
        chosen = get_preset(preset.value) if preset else None
        dataset_name, split, mode_name = apply_preset(
            chosen,
            dataset=dataset.value if dataset else None,
            split=split,
            mode=mode.value if mode else None,
        )
    sam3_only = mode_name == ModeChoice.sam3_only.value
    with one_line_errors():
        try:
            # Every flag and path first: a refusal must not cost minutes of loading models.
            backends.validate(chat=not sam3_only)
            check_writable_dir(out, "--out")
            engine_opts = engine_options(
                engine=engine,
                concurrency=concurrency,
                ray_address=ray_address,
                workers=workers,
                gpus_per_worker=gpus_per_worker,
            )
            if not sam3_only:
                require_chat_model_name(backends, engine_opts.engine)
            agent_config = config_from_flags(
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
            if not sam3_only:
                check_context_backend(agent_config, backends)
            from sam3_agent.runs.evaluation.run import EvalSet, evaluate
            from sam3_agent.runs.evaluation.runner import parse_shard

            selection = EvalSet(
                dataset=dataset_name,
                root=root,
                split=split,
                images=images,
                all_texts=all_texts,
                limit=limit,
                shard=parse_shard(shard) if shard else (0, 1),
                preset=chosen.name if chosen else None,
            )
            samples = selection.load()
            # Which default MLLM, and do the models fit: before any download. Only where they
            # load here: Ray workers load them on machines whose memory this one cannot see
            # (and there the flags name the MLLM, checked above).
            if engine_opts.engine == "local":
                plan = plan_models(backends, chat=not sam3_only, memory_check=memory_check)
                backends = plan.backends
                if plan.note:
                    err_console.print(plan.note, markup=False)
            bar = make_progress(err_console, "eval", EvalTally()) if progress else None
            try:
                done = evaluate(
                    selection,
                    out,
                    backends,
                    mode=mode_name,
                    config=agent_config,
                    engine=engine_opts,
                    retry_failed=retry_failed,
                    progress=bar,
                    samples=samples,
                )
            finally:
                if bar is not None:
                    bar.stop()
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]interrupted[/yellow]: finished samples are kept in {out}; "
                "run the same command to resume.",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    outcome = done.run
    err_console.print(
        f"{outcome.ran} evaluated, {outcome.skipped} already stored, {outcome.failed} failed",
    )
    _print_summary(done.report)


def report_command(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories (shards or runs to compare).")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where to write the report (default: the only RUN_DIR)."),
    ] = None,
    gallery: Annotated[
        int, typer.Option("--gallery", min=0, help="Worst samples shown per method.")
    ] = 6,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Write metrics.json, report.md, the IoU histogram and a gallery for run directories.

    Several directories are merged: shards of one run, or runs of other splits or models
    (one table row per model and mode).
    """
    setup_logging(verbose)
    with one_line_errors():
        if out is None:
            if len(run_dirs) != 1:
                raise UserError("with several run directories, say where the report goes: --out")
            out = run_dirs[0]
        from sam3_agent.runs.evaluation.report import write_report

        files = write_report(run_dirs, out, gallery_size=gallery)
    _print_summary(files)


__all__ = ["eval_command", "report_command"]
