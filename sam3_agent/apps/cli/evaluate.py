"""``sam3-agent eval``: evaluation on published datasets, resumable, local or on Ray.

The command builds the backend spec, agent config and engine options from its flags (see
:mod:`sam3_agent.apps.cli.flags`), loads the samples, then makes one library call that
evaluates them and writes the report (:func:`sam3_agent.runs.evaluation.run.evaluate`).
Image datasets are scored with gIoU / cIoU, video datasets (the video agent on each
sample's frames) with J, F and J&F.
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, say
from sam3_agent.apps.cli.flags import (
    AGENT,
    BACKENDS,
    ENGINE,
    VERBOSE,
    VIDEO,
    Mode,
    OutDirOpt,
    ProgressOpt,
    RetryFailedOpt,
    VideoFlags,
    check_agent,
    with_flags,
)
from sam3_agent.apps.cli.jobs import (
    EvalTally,
    kept_when_interrupted,
    plan_for,
    print_report_summary,
)
from sam3_agent.apps.cli.progress import make_progress
from sam3_agent.backends.segmenters import DEFAULT_VIDEO_CACHE_MB
from sam3_agent.backends.spec import BackendSpec, check_writable_dir
from sam3_agent.runs.evaluation.catalog import IMAGE_DATASETS, VIDEO_DATASETS, is_video_dataset
from sam3_agent.runs.evaluation.presets import PRESETS, apply_preset, get_preset
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError

DATA = "Dataset"
RUN = "Run"

DatasetChoice = Enum(  # type: ignore[misc]
    "DatasetChoice", {n: n for n in (*IMAGE_DATASETS, *VIDEO_DATASETS)}, type=str
)
PresetChoice = Enum(  # type: ignore[misc]  # the values come from the presets' data
    "PresetChoice", {name: name for name in PRESETS}, type=str
)


def _data(*names: str, help: str, **kwargs: object) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, rich_help_panel=DATA, **kwargs)  # type: ignore[arg-type]


@with_flags(BACKENDS, AGENT, VIDEO, ENGINE, VERBOSE)
def eval_command(
    root: Annotated[Path, _data("--root", metavar="DIR", help="Dataset directory.")],
    out: OutDirOpt,
    dataset: Annotated[
        DatasetChoice | None,
        _data(
            "--dataset",
            help=f"Dataset format: an image dataset, or a video one ({', '.join(VIDEO_DATASETS)}: "
            "the video agent, scored with J, F and J&F).",
        ),
    ] = None,
    preset: Annotated[
        PresetChoice | None,
        _data(
            "--preset",
            help="One of the SAM 3 paper's evaluations: sets --dataset, --split and --mode "
            "(docs/evaluation.md lists them).",
        ),
    ] = None,
    split: Annotated[
        str | None,
        _data(
            "--split",
            metavar="SPLIT",
            help="Split to evaluate (default: val; a video dataset's first split, e.g. "
            "valid, valid_u for mevis).",
        ),
    ] = None,
    images: Annotated[
        Path | None,
        _data(
            "--images",
            metavar="DIR",
            help="COCO train2014 image directory (refer datasets; found under --root if omitted).",
        ),
    ] = None,
    all_texts: Annotated[
        bool,
        _data(
            "--all-texts",
            metavar="",
            help="ReasonSeg: evaluate every text of an image, not only the first.",
        ),
    ] = False,
    limit: Annotated[
        int | None,
        _data("--limit", metavar="N", min=1, help="Only the first N samples (in dataset order)."),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            help="i/n: evaluate shard i (0-based) of n; split by image, stable across runs.",
            rich_help_panel=RUN,
        ),
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option(
            "--mode",
            help="agent: MLLM + SAM 3 (default); sam3-only: SAM 3 with the raw query as phrase.",
            rich_help_panel=RUN,
        ),
    ] = None,
    retry_failed: RetryFailedOpt = False,
    progress: ProgressOpt = True,
    *,
    backends: BackendSpec,
    config: AgentConfig,
    video_flags: VideoFlags,
    engine: EngineOptions,
) -> None:
    """Evaluate on a dataset; rerun the same command to resume after a stop.

    Exit codes: 0 done (failed samples are counted, not fatal), 1 backend error,
    2 bad input or dataset, 130 interrupted (finished samples are kept).
    """
    with one_line_errors():
        chosen = get_preset(preset.value) if preset else None
        dataset_name, split, mode_name = apply_preset(
            chosen, dataset=dataset and dataset.value, split=split, mode=mode and mode.value
        )
        video = is_video_dataset(dataset_name)
        changed = _changed_video_flags(video_flags)
        if video:
            _refuse_image_flags(images=images, all_texts=all_texts, mode=mode_name)
            for flag in changed:
                if flag in FRAME_SELECTION_FLAGS:
                    raise UserError(
                        f"{flag} applies to track: eval tracks every frame of a sample's "
                        "folder, as the benchmarks score every annotated frame"
                    )
            backends = replace(backends, video_cache_mb=video_flags.cache_mb)
        elif changed:
            raise UserError(f"{changed[0]} applies to video datasets")
        sam3_only = mode_name == Mode.sam3_only.value
        # Every flag and path first: a refusal must not cost minutes of loading models.
        backends.validate(chat=not sam3_only)
        check_writable_dir(out, "--out")
        check_agent(config, backends, chat=not sam3_only)
        if not sam3_only:
            backends.require_model_name(engine.engine)
        from sam3_agent.runs.evaluation.run import evaluate, running_metrics
        from sam3_agent.runs.evaluation.selection import EvalSet, VideoEvalSet, parse_shard

        shard_index = parse_shard(shard) if shard else (0, 1)
        preset_name = chosen.name if chosen else None
        selection: EvalSet | VideoEvalSet
        if video:
            selection = VideoEvalSet(
                dataset=dataset_name, root=root, split=split, limit=limit, shard=shard_index,
                preset=preset_name,
            )  # fmt: skip
        else:
            selection = EvalSet(
                dataset=dataset_name, root=root, split=split, images=images,
                all_texts=all_texts, limit=limit, shard=shard_index, preset=preset_name,
            )  # fmt: skip
        loaded = selection.load()
        backends = plan_for(backends, engine, chat=not sam3_only, video=video)
        tally = EvalTally(running_metrics(dataset_name))
        bar = make_progress(err_console, "eval", tally) if progress else None
        with kept_when_interrupted(out, "samples", bar):
            done = evaluate(
                selection, out, backends, mode=mode_name, config=config, engine=engine,
                retry_failed=retry_failed, progress=bar, loaded=loaded,
                video_options=video_flags.options if video else None,
            )  # fmt: skip
    say(f"{done.run.ran} evaluated, {done.run.skipped} already stored, {done.run.failed} failed")
    print_report_summary(done.report)


FRAME_SELECTION_FLAGS = ("--stride", "--max-frames", "--start", "--end", "--fps")
"""The video flags of ``track`` that choose frames: ``eval`` tracks all of a sample's."""


def _changed_video_flags(flags: VideoFlags) -> list[str]:
    """The video flags given other values than their defaults, in the order of ``--help``."""
    selection, options = FrameSelection(), VideoOptions()
    fields = [
        ("--stride", flags.selection.stride, selection.stride),
        ("--max-frames", flags.selection.max_frames, selection.max_frames),
        ("--start", flags.selection.start_s, selection.start_s),
        ("--end", flags.selection.end_s, selection.end_s),
        ("--fps", flags.selection.fps, selection.fps),
        ("--frames-shown", flags.options.frames_shown, options.frames_shown),
        ("--check-frames", flags.options.check_frames, options.check_frames),
        ("--uncertain-looks", flags.options.uncertain_looks, options.uncertain_looks),
        ("--video-cache-mb", flags.cache_mb, DEFAULT_VIDEO_CACHE_MB),
    ]
    return [flag for flag, given, default in fields if given != default]


def _refuse_image_flags(*, images: Path | None, all_texts: bool, mode: str) -> None:
    """The flags of image datasets only, refused by name for a video dataset."""
    if images is not None:
        raise UserError("--images applies to the refer datasets (COCO images), not to videos")
    if all_texts:
        raise UserError("--all-texts applies to reasonseg only")
    if mode != "agent":
        raise UserError(
            f"--mode {mode} applies to image datasets; videos are evaluated with the agent"
        )


__all__ = ["eval_command"]
