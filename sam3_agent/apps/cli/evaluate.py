"""``sam3-agent eval``: checks the flags, loads the samples, then makes one library call that
evaluates them and writes the report (:func:`sam3_agent.runs.evaluation.run.evaluate`)."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli import jobs
from sam3_agent.apps.cli.console import err_console, one_line_errors, say
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS
from sam3_agent.apps.cli.flags.compose import VERBOSE, Mode, with_flags
from sam3_agent.apps.cli.flags.inputs import VIDEO, VideoFlags
from sam3_agent.apps.cli.flags.jobs import ENGINE, OutDirOpt, ProgressOpt, RetryFailedOpt
from sam3_agent.apps.cli.progress import EvalTally, make_progress
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.evaluation.catalog import (
    IMAGE_DATASETS,
    PRESETS,
    VIDEO_DATASETS,
    apply_preset,
    check_options,
    get_preset,
)
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.values.config import AgentConfig

DatasetChoice = Enum(  # type: ignore[misc]
    "DatasetChoice", {n: n for n in (*IMAGE_DATASETS, *VIDEO_DATASETS)}, type=str
)
PresetChoice = Enum(  # type: ignore[misc]  # the values come from the presets' data
    "PresetChoice", {name: name for name in PRESETS}, type=str
)


def _data(*names: str, help: str, panel: str = "Dataset", **kw: object) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)  # type: ignore[arg-type]


@with_flags(BACKENDS, AGENT, VIDEO, ENGINE, VERBOSE)
def eval_command(
    root: Annotated[Path, _data("--root", metavar="DIR", help="Dataset directory.")],
    out: OutDirOpt,
    dataset: Annotated[DatasetChoice | None, _data("--dataset", help="Dataset format: an image "
        f"dataset, or a video one ({', '.join(VIDEO_DATASETS)}: the video agent, scored with J, "
        "F and J&F).")] = None,
    preset: Annotated[PresetChoice | None, _data("--preset", help="One of the SAM 3 paper's "
        "evaluations: sets --dataset, --split and --mode (docs/evaluation.md lists them).")] = None,
    split: Annotated[str | None, _data("--split", metavar="SPLIT", help="Split to evaluate "
        "(default: val; a video dataset's first split, e.g. valid, valid_u for mevis).")] = None,
    images: Annotated[Path | None, _data("--images", metavar="DIR", help="COCO train2014 image "
        "directory (refer datasets; found under --root if omitted).")] = None,
    all_texts: Annotated[bool, _data("--all-texts", metavar="", help="ReasonSeg: evaluate every "
        "text of an image, not only the first.")] = False,
    limit: Annotated[int | None, _data("--limit", metavar="N", min=1, help="Only the first N "
        "samples (in dataset order).")] = None,
    shard: Annotated[str | None, _data("--shard", metavar="I/N", panel="Run", help="i/n: "
        "evaluate shard i (0-based) of n; split by image, stable across runs.")] = None,
    mode: Annotated[Mode | None, _data("--mode", panel="Run", help="agent: MLLM + SAM 3 "
        "(default); sam3-only: SAM 3 with the raw query as phrase.")] = None,
    retry_failed: RetryFailedOpt = False, progress: ProgressOpt = True, *,
    backends: BackendSpec, config: AgentConfig, video_flags: VideoFlags, engine: EngineOptions,
) -> None:  # fmt: skip
    """Evaluate on a dataset; rerun the same command to resume after a stop.

    Exit codes: 0 done (failed samples are counted, not fatal), 1 backend error,
    2 bad input or dataset, 130 interrupted (finished samples are kept).
    """
    with one_line_errors():
        chosen = get_preset(preset.value) if preset else None
        dataset_name, split, mode_name = apply_preset(
            chosen, dataset=dataset and dataset.value, split=split, mode=mode and mode.value
        )
        check_options(dataset_name, images=images, all_texts=all_texts, mode=mode_name,
                      frames=video_flags.selection, options=video_flags.options,
                      video_cache_mb=video_flags.cache_mb)  # fmt: skip
        video = dataset_name in VIDEO_DATASETS
        # The default unless video.
        backends = replace(backends, video_cache_mb=video_flags.cache_mb)
        sam3_only = mode_name == Mode.sam3_only.value
        jobs.check_before_loading(backends, config, engine, out, chat=not sam3_only)
        from sam3_agent.runs.evaluation.results import running_metrics
        from sam3_agent.runs.evaluation.run import evaluate
        from sam3_agent.runs.evaluation.selection import eval_set, parse_shard

        selection = eval_set(
            dataset_name, root, split, images=images, all_texts=all_texts, limit=limit,
            shard=parse_shard(shard) if shard else (0, 1), preset=chosen.name if chosen else None,
        )  # fmt: skip
        loaded = selection.load()
        backends = jobs.plan_for(backends, engine, chat=not sam3_only, video=video)
        tally = EvalTally(running_metrics(dataset_name))
        bar = make_progress(err_console, "eval", tally) if progress else None
        with jobs.kept_when_interrupted(out, "samples", bar):
            done = evaluate(
                selection, out, backends, mode=mode_name, config=config, engine=engine,
                retry_failed=retry_failed, progress=bar, loaded=loaded,
                video_options=video_flags.options if video else None,
            )  # fmt: skip
    say(f"{done.run.ran} evaluated, {done.run.skipped} already stored, {done.run.failed} failed")
    jobs.print_report_summary(done.report)
