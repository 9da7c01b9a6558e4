"""``sam3-agent report RUN_DIR...``: the report of finished evaluation runs, merged."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.jobs import print_report_summary
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
        for run_dir in run_dirs:
            _refuse_single_run(run_dir)
        from sam3_agent.runs.evaluation.report import report_runs

        files = report_runs(run_dirs, out, gallery_size=gallery)
    print_report_summary(files)


def _refuse_single_run(run_dir: Path) -> None:
    """Refuse the directory of one ``run`` or ``track`` session (``report`` reads the
    results store of ``eval`` and ``batch``), saying which command shows it instead."""
    from sam3_agent.agent import rundir
    from sam3_agent.runs.jobs.store import STORE_NAME

    if (run_dir / STORE_NAME).exists() or not any((run_dir / m).exists() for m in rundir.MARKERS):
        return
    raise UserError(
        f"{run_dir} is a single run's directory (sam3-agent run or track), not an eval or "
        f"batch run; show it with: sam3-agent inspect {run_dir}"
    )
