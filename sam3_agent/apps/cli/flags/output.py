"""Logging and the output of one request (``run``)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from sam3_agent.apps.cli.console import setup_logging
from sam3_agent.apps.cli.flags.compose import FlagGroup, flag


def _logging(values: dict[str, Any], built: dict[str, Any]) -> bool:
    setup_logging(values["verbose"])
    return bool(values["verbose"])


VERBOSE = FlagGroup(
    "verbose",
    (flag("verbose", bool, False, "--verbose", "-v", help="Debug logging."),),
    _logging,
    first=True,
)
"""``--verbose/-v``: logging set up before anything else (listed last, built first)."""


class Mode(str, Enum):
    """``--mode`` of ``run`` and ``eval``."""

    agent = "agent"
    sam3_only = "sam3-only"


def _out(medium: str) -> typer.models.OptionInfo:
    return typer.Option(
        "--out",
        "-o",
        metavar="DIR",
        help=f"Output directory (default: runs/<time>-<{medium}>-<query>).",
    )


def _resume(same: str) -> typer.models.OptionInfo:
    return typer.Option(
        "--resume",
        metavar="DIR",
        help="Continue the interrupted session in this run directory, from its last committed "
        f"round (give the same {same}).",
    )


RunOutOpt = Annotated[Path | None, _out("image")]
TrackOutOpt = Annotated[Path | None, _out("video")]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite", metavar="", help="Replace a previous run's files in --out (nothing else)."
    ),
]
ExportOpt = Annotated[
    str | None,
    typer.Option(
        "--export",
        metavar="FORMATS",
        help="Also write per-mask files: png (masks/NN.png, binary), polygons (in "
        "result.json); comma-separated.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print result.json to stdout.")]
ResumeOpt = Annotated[Path | None, _resume("IMAGE, QUERY and agent flags")]
TrackResumeOpt = Annotated[Path | None, _resume("VIDEO, QUERY, agent and video flags")]
