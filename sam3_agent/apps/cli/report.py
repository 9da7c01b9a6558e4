"""``sam3-agent report RUN_DIR...``: the report of finished evaluation runs, merged."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags import VERBOSE, with_flags
from sam3_agent.apps.cli.jobs import print_report_summary, print_video_report_summary
from sam3_agent.values.errors import UserError


@with_flags(VERBOSE)
def report_command(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories (shards or runs to compare).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="Where to write the report (default: the only RUN_DIR).",
        ),
    ] = None,
    gallery: Annotated[
        int, typer.Option("--gallery", metavar="N", min=0, help="Worst samples shown per method.")
    ] = 6,
) -> None:
    """Write metrics.json, report.md, the IoU histogram and a gallery for run directories.

    Several directories are merged: shards of one run, or runs of other splits or models
    (one table row per model and mode). Video runs get J, F and J&F per split and subset
    (no histogram or gallery); image and video runs are reported separately.
    """
    with one_line_errors():
        if out is None:
            if len(run_dirs) != 1:
                raise UserError("with several run directories, say where the report goes: --out")
            out = run_dirs[0]
        from sam3_agent.runs.evaluation.methods import VIDEO, runs_kind

        video = runs_kind(run_dirs) == VIDEO
        if video:
            from sam3_agent.runs.evaluation.video.report import write_video_report

            videos = write_video_report(run_dirs, out)
        else:
            from sam3_agent.runs.evaluation.report import write_report

            files = write_report(run_dirs, out, gallery_size=gallery)
    if video:
        print_video_report_summary(videos)
    else:
        print_report_summary(files)


__all__ = ["report_command"]
