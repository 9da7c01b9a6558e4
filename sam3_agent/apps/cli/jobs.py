"""What ``eval`` and ``batch`` share once their flags are built: one call that runs the jobs
(the run's identity, its store, the worker factory, the engine, the progress display), the
running tallies, and the summaries printed at the end.

:func:`evaluate_samples` and :func:`run_requests` are the seam to the library: each takes
built values (a :class:`~sam3_agent.backends.spec.BackendSpec`, an ``AgentConfig``,
``EngineOptions``) and nothing of the command line but the progress display.

Nothing heavy is imported at module level: ``eval --help`` and ``batch --help`` stay light.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from sam3_agent.apps.cli.console import EXIT_INTERRUPTED, out_console, plain, say
from sam3_agent.apps.cli.progress import PlainProgress, ProgressBar
from sam3_agent.runs.jobs.workers import BatchWorkerFactory, EvalWorkerFactory

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.backends.spec import BackendSpec
    from sam3_agent.runs.batch.requests import BatchRequest
    from sam3_agent.runs.batch.summary import BatchTotals
    from sam3_agent.runs.evaluation.datasets import Sample
    from sam3_agent.runs.evaluation.report import ReportFiles
    from sam3_agent.runs.evaluation.store import ResultStore, SampleResult
    from sam3_agent.runs.jobs.base import EngineOptions, Job, WorkerFactory
    from sam3_agent.runs.jobs.driver import RunOutcome
    from sam3_agent.values.config import AgentConfig

Bar = ProgressBar | PlainProgress | None
J = TypeVar("J", bound="Job")

# Settings that change no prediction, so a resumed run may change them freely.
EVAL_NOT_IDENTITY = ("check_concurrency", "prompts_dir")
# The pixel limit only refuses images: failures that --retry-failed runs again under a new
# limit (eval keeps it in its identity: runs made before --max-pixels resume as they were).
BATCH_NOT_IDENTITY = (*EVAL_NOT_IDENTITY, "max_image_pixels")


def plan_for(spec: BackendSpec, engine: EngineOptions, *, chat: bool = True) -> BackendSpec:
    """Which default MLLM, and do the models fit: before any download. Only where they load
    here: Ray workers load them on machines whose memory this one cannot see (and there the
    flags name the MLLM: :meth:`BackendSpec.require_model_name`)."""
    if engine.engine != "local":
        return spec
    plan = spec.plan(chat=chat)
    if plan.note:
        say(plan.note)
    return plan.spec


@contextlib.contextmanager
def kept_when_interrupted(out: Path, what: str) -> Iterator[None]:
    """Ctrl+C: say that the finished ``what`` are kept in ``out``; exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        say(("interrupted", "yellow"), f": finished {what} are kept in {out}; run the same "
            "command to resume.")  # fmt: skip
        raise typer.Exit(EXIT_INTERRUPTED) from None


def select_samples(
    dataset: str, root: Path, split: str, *, images: Path | None, all_texts: bool,
    limit: int | None, shard: str | None, mode: str, preset: str | None,
) -> tuple[list[Sample], dict[str, Any]]:  # fmt: skip
    """The samples to evaluate (the first ``limit``, then shard ``i/n``), and the identity
    of the run they make (a resumed run must have the same)."""
    from sam3_agent.runs.evaluation.datasets import load_samples
    from sam3_agent.runs.evaluation.runner import parse_shard, select_shard

    index, count = parse_shard(shard) if shard else (0, 1)
    samples = load_samples(dataset, root, split, images=images, all_texts=all_texts)
    identity = {
        "dataset": dataset,
        "split": split,
        "mode": mode,
        "all_texts": all_texts,
        "shard": f"{index}/{count}" if count > 1 else None,
        # Only when given: runs made before presets existed keep their identity.
        **({"preset": preset} if preset else {}),
    }
    return select_shard(samples[:limit], index, count), identity


def evaluate_samples(
    samples: list[Sample],
    *,
    out: Path,
    spec: BackendSpec,
    agent_config: AgentConfig,
    identity: dict[str, Any],
    sam3_only: bool,
    engine: EngineOptions,
    retry_failed: bool,
    bar: Bar,
) -> RunOutcome:
    """Evaluate ``samples`` into the run directory ``out`` (resumed when it holds a run of
    the same identity). ``spec`` is planned: a default MLLM is named there."""
    # The model's name is part of the run's identity. When the options say it, the run
    # directory is checked before any model is loaded: a refusal should not cost minutes.
    model_name = None if sam3_only else spec.model_name()
    chat_model = None
    if not sam3_only and model_name is None:
        chat_model = spec.build_chat_model()
        model_name = chat_model.name
    config = {
        **identity,
        "model": model_name,
        "sam3": spec.sam3_url or spec.sam3,
        "agent": _settings(agent_config, EVAL_NOT_IDENTITY),
    }
    if sam3_only:
        config["agent"] = {"score_threshold": agent_config.score_threshold}
    elif generation := spec.generation_identity():
        config["generation"] = generation  # only when given: older runs keep their identity
    name = str(config["sam3"] if sam3_only else model_name)
    factory = EvalWorkerFactory(
        spec, agent_config, sam3_only=sam3_only, model=name, chat_model=chat_model
    )
    return _run(samples, out, config, factory, engine, retry_failed, bar)


def run_requests(
    requests: list[BatchRequest],
    *,
    out: Path,
    spec: BackendSpec,
    agent_config: AgentConfig,
    engine: EngineOptions,
    retry_failed: bool,
    bar: Bar,
) -> tuple[RunOutcome, BatchTotals]:
    """Run the agent on ``requests`` into ``out`` (resumable) and write its summary."""
    from sam3_agent.runs.batch.summary import write_summary

    model_name = spec.model_name()
    chat_model: ChatModel | None = None
    if model_name is None:
        chat_model = spec.build_chat_model()
        model_name = chat_model.name
    config: dict[str, Any] = {
        "command": "batch",
        "model": model_name,
        "sam3": spec.sam3_url or spec.sam3,
        "agent": _settings(agent_config, BATCH_NOT_IDENTITY),
    }
    if generation := spec.generation_identity():
        config["generation"] = generation
    factory = BatchWorkerFactory(spec, agent_config, chat_model=chat_model)
    totals: list[BatchTotals] = []

    def summarize(store: ResultStore) -> None:
        totals.append(write_summary(out, requests, store.results()))

    outcome = _run(requests, out, config, factory, engine, retry_failed, bar, summarize)
    return outcome, totals[0]


def _settings(agent_config: AgentConfig, leave_out: tuple[str, ...]) -> dict[str, Any]:
    from sam3_agent.agent.prompts import load_prompt_set

    settings = {k: v for k, v in agent_config.to_dict().items() if k not in leave_out}
    # The prompts' content, not where they lie, makes runs comparable.
    settings["prompts"] = load_prompt_set(agent_config.prompts_dir).identity()
    return settings


def _run(
    jobs: Sequence[J],
    out: Path,
    config: dict[str, Any],
    factory: WorkerFactory[J],
    engine: EngineOptions,
    retry_failed: bool,
    bar: Bar,
    then: Callable[[ResultStore], None] | None = None,
) -> RunOutcome:
    """Open (or resume) the run's store, run the jobs, then ``then(store)`` while it is open."""
    from sam3_agent.runs.evaluation.store import ResultStore
    from sam3_agent.runs.jobs.base import build_engine
    from sam3_agent.runs.jobs.driver import run_jobs

    with ResultStore.create_or_resume(out, config) as store:
        store.set_planned(len(jobs))
        try:
            outcome = asyncio.run(
                run_jobs(
                    jobs,
                    store,
                    build_engine(engine),
                    factory,
                    progress=bar,
                    retry_failed=retry_failed,
                )
            )
        finally:
            if bar is not None:
                bar.stop()
        if then is not None:
            then(store)
    return outcome


class EvalTally:
    """Running gIoU / cIoU and failures, for the progress display."""

    def __init__(self) -> None:
        from sam3_agent.runs.evaluation.metrics import RunningMetrics

        self.running: Any = RunningMetrics()

    def add(self, result: SampleResult) -> None:
        self.running.add(result.scored())

    def text(self) -> str:
        running = self.running
        return f"gIoU {_pct(running.giou)}  cIoU {_pct(running.ciou)}  failed {running.failed}"


class BatchTally:
    """Requests by outcome, for the progress display."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, result: SampleResult) -> None:
        self.counts[result.status] += 1

    def text(self) -> str:
        c = self.counts
        return f"masks {c['masks']}  no mask {c['no_mask']}  failed {c['failed']}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def print_report_summary(files: ReportFiles) -> None:
    """One line per method (its label names a model: plain text), and the report's path."""
    for m in files.methods:
        overall = m.metrics.overall
        say(
            f"{m.label}: {overall.count} samples, gIoU {_pct(overall.giou)}, "
            f"cIoU {_pct(overall.ciou)}, failed {overall.failed}",
            console=out_console,
        )
    say(f"report: {files.report_md}", console=out_console)


def print_batch_totals(totals: BatchTotals, out: Path) -> None:
    """The batch's outcome as a table on stdout, and where its summary lies."""
    from rich.console import Console
    from rich.table import Table

    from sam3_agent.runs.batch.summary import SUMMARY_NAME

    table = Table(title=plain(f"batch {out}"), show_edge=False)
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
    say(f"summary: {out / SUMMARY_NAME}", console=console)
