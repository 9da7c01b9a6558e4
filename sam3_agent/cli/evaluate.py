"""``sam3-agent eval`` and ``sam3-agent report``: batch evaluation on published datasets.

Registered in :mod:`sam3_agent.cli.main` as ``app.command("eval")(eval_command)`` and
``app.command("report")(report_command)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.cli.console import err_console, one_line_errors, out_console, setup_logging
from sam3_agent.cli.options import (
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
from sam3_agent.config import AgentConfig
from sam3_agent.errors import UserError
from sam3_agent.evaluation.presets import PRESETS, apply_preset, get_preset

if TYPE_CHECKING:
    from sam3_agent.evaluation.datasets import Sample
    from sam3_agent.evaluation.report import ReportFiles
    from sam3_agent.evaluation.runner import RunOutcome
    from sam3_agent.evaluation.store import SampleResult

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


# Settings that do not change any prediction, so a resumed run may change them freely.
_NOT_IDENTITY = ("check_concurrency", "prompts_dir")


DEFAULT_CONCURRENCY = 8
"""Samples at once (the runner's default, sized for one vLLM server; a test keeps the two
equal, so ``--help`` needs no import of the runner)."""

PLAIN_PROGRESS_INTERVAL_S = 30.0
"""Seconds between progress lines when stderr is not a terminal (a log file)."""


def _running_stats(running: Any) -> str:
    giou = "–" if running.giou is None else f"{100 * running.giou:.1f}"
    ciou = "–" if running.ciou is None else f"{100 * running.ciou:.1f}"
    return f"gIoU {giou}  cIoU {ciou}  failed {running.failed}"


class _ProgressBar:
    """A rich progress bar on stderr with ETA, running gIoU / cIoU and failures."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from sam3_agent.evaluation.metrics import RunningMetrics

        self._progress = Progress(
            TextColumn("[bold]eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=console,
        )
        self._task: Any = None
        self._running = RunningMetrics()

    def start(self, total: int, already_done: Sequence[SampleResult]) -> None:
        for r in already_done:
            self._running.add(r.scored())
        self._progress.start()
        self._task = self._progress.add_task(
            "eval", total=total, completed=len(already_done), stats=_running_stats(self._running)
        )

    def update(self, result: SampleResult) -> None:
        self._running.add(result.scored())
        if self._task is not None:
            self._progress.update(self._task, advance=1, stats=_running_stats(self._running))

    def stop(self) -> None:
        self._progress.stop()


class _PlainProgress:
    """Progress for a log file: one plain line at the start, then at most one line per
    ``interval_s`` seconds, and one at the end; no cursor movement, no colour."""

    def __init__(
        self,
        console: Console,
        interval_s: float = PLAIN_PROGRESS_INTERVAL_S,
        clock: Any = time.monotonic,
    ) -> None:
        from sam3_agent.evaluation.metrics import RunningMetrics

        self._console = console
        self._interval_s = interval_s
        self._clock = clock
        self._running = RunningMetrics()
        self._total = 0
        self._done = 0
        self._resumed = 0
        self._started = 0.0
        self._last_line = 0.0

    def _line(self) -> None:
        now = self._clock()
        self._last_line = now
        elapsed = now - self._started
        fresh = self._done - self._resumed
        eta = "–"
        if fresh > 0 and self._total > self._done:
            eta = _clock_text(elapsed / fresh * (self._total - self._done))
        percent = 100 * self._done / self._total if self._total else 100.0
        self._console.print(
            f"eval {self._done}/{self._total} ({percent:.0f}%) elapsed {_clock_text(elapsed)} "
            f"eta {eta} {_running_stats(self._running)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def start(self, total: int, already_done: Sequence[SampleResult]) -> None:
        for r in already_done:
            self._running.add(r.scored())
        self._total = total
        self._done = self._resumed = len(already_done)
        self._started = self._clock()
        self._line()

    def update(self, result: SampleResult) -> None:
        self._running.add(result.scored())
        self._done += 1
        if self._done >= self._total or self._clock() - self._last_line >= self._interval_s:
            self._line()

    def stop(self) -> None:
        if self._last_line and self._done < self._total:
            self._line()


def _clock_text(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def make_progress(console: Console) -> _ProgressBar | _PlainProgress:
    """A live bar on a terminal, plain periodic lines otherwise."""
    return _ProgressBar(console) if console.is_terminal else _PlainProgress(console)


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
            "--concurrency", min=1, help="Samples evaluated at the same time.", rich_help_panel=RUN
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
    max_image_side: MaxImageSideOpt = AgentConfig.max_image_side,
    prompts: PromptsOpt = None,
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
            agent_config = config_from_flags(
                max_rounds=max_rounds,
                max_corrections=max_corrections,
                check_concurrency=check_concurrency,
                score_threshold=score_threshold,
                max_image_side=max_image_side,
                tool_protocol=tool_protocol,
                prompts_dir=prompts,
            )
            from sam3_agent.evaluation.datasets import load_samples
            from sam3_agent.evaluation.report import write_report
            from sam3_agent.evaluation.runner import parse_shard, select_shard

            shard_index, shard_count = parse_shard(shard) if shard else (0, 1)
            samples = load_samples(dataset_name, root, split, images=images, all_texts=all_texts)
            if limit is not None:
                samples = samples[:limit]
            samples = select_shard(samples, shard_index, shard_count)
            plan = plan_models(backends, chat=not sam3_only, memory_check=memory_check)
            backends = plan.backends
            if plan.note:
                err_console.print(plan.note, markup=False)
            outcome = _run(
                samples,
                out=out,
                backends=backends,
                agent_config=agent_config,
                identity={
                    "dataset": dataset_name,
                    "split": split,
                    "mode": mode_name,
                    "all_texts": all_texts,
                    "shard": f"{shard_index}/{shard_count}" if shard_count > 1 else None,
                    # Only when given: runs made before presets existed keep their identity.
                    **({"preset": chosen.name} if chosen else {}),
                },
                sam3_only=sam3_only,
                concurrency=concurrency,
                retry_failed=retry_failed,
                bar=make_progress(err_console) if progress else None,
            )
            files = write_report([out], out)
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]interrupted[/yellow]: finished samples are kept in {out}; "
                "run the same command to resume.",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    err_console.print(
        f"{outcome.evaluated} evaluated, {outcome.skipped} already stored, {outcome.failed} failed",
    )
    _print_summary(files)


def _model_name_from_flags(backends: BackendOptions) -> str | None:
    """The chat model's name as its backend will report it, when the flags alone say it."""
    if backends.llm and backends.llm.startswith("hf:") and backends.llm[3:].strip():
        return backends.llm[3:].strip()
    if backends.llm_model and not backends.llm:
        return backends.llm_model
    return None


def _generation_identity(backends: BackendOptions) -> dict[str, Any]:
    """The generation flags that were given (they change predictions)."""
    settings = backends.generation()
    given = {
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        **settings.key_params(),
    }
    return {k: v for k, v in given.items() if v is not None}


def _run(
    samples: list[Sample],
    *,
    out: Path,
    backends: BackendOptions,
    agent_config: AgentConfig,
    identity: dict[str, Any],
    sam3_only: bool,
    concurrency: int,
    retry_failed: bool,
    bar: _ProgressBar | _PlainProgress | None,
) -> RunOutcome:
    from sam3_agent.agent import Sam3Agent
    from sam3_agent.evaluation.runner import (
        AgentPredictor,
        Predictor,
        Sam3OnlyPredictor,
        SharedEmbeddings,
        evaluate,
    )
    from sam3_agent.evaluation.store import ResultStore
    from sam3_agent.prompts import load_prompt_set

    # The model's name is part of the run's identity. When the flags say it, the run
    # directory is checked before any model is loaded: a refusal should not cost minutes.
    model_name = None if sam3_only else _model_name_from_flags(backends)
    chat_model = None
    if not sam3_only and model_name is None:
        chat_model = backends.build_chat_model()
        model_name = chat_model.name
    settings = {k: v for k, v in agent_config.to_dict().items() if k not in _NOT_IDENTITY}
    # The prompts' content, not where they lie, makes runs comparable.
    settings["prompts"] = load_prompt_set(agent_config.prompts_dir).identity()
    if sam3_only:
        settings = {"score_threshold": settings["score_threshold"]}
    config = {
        **identity,
        "model": model_name,
        "sam3": backends.sam3_url or backends.sam3,
        "agent": settings,
    }
    generation = _generation_identity(backends)
    if generation and not sam3_only:
        # Only when given: runs made before these flags existed keep their identity.
        config["generation"] = generation
    with ResultStore.create_or_resume(out, config) as store:
        store.set_planned(len(samples))
        if not sam3_only and chat_model is None:
            chat_model = backends.build_chat_model()
        shared = SharedEmbeddings(backends.build_segmenter())
        predictor: Predictor
        if chat_model is None:
            predictor = Sam3OnlyPredictor(
                shared,
                str(config["sam3"]),
                score_threshold=agent_config.score_threshold,
            )
        else:
            agent = Sam3Agent(shared, chat_model, config=agent_config)
            predictor = AgentPredictor(agent, str(model_name))
        try:
            return asyncio.run(
                evaluate(
                    samples,
                    store,
                    predictor,
                    concurrency=concurrency,
                    shared=shared,
                    progress=bar,
                    retry_failed=retry_failed,
                )
            )
        finally:
            if bar is not None:
                bar.stop()


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
        from sam3_agent.evaluation.report import write_report

        files = write_report(run_dirs, out, gallery_size=gallery)
    _print_summary(files)


__all__ = ["eval_command", "report_command"]
