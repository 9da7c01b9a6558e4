"""The flags of the commands that run many jobs (``eval``, ``batch``): where they run, the
run directory, the progress display."""

from __future__ import annotations

import functools
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.runs.jobs.base import DEFAULT_CONCURRENCY, ENGINES, EngineOptions

ENGINE_PANEL = "Engine"
RUN_PANEL = "Run"

EngineChoice = Enum("EngineChoice", {name: name for name in ENGINES}, type=str)  # type: ignore[misc]

_engine = functools.partial(flag, panel=ENGINE_PANEL)


def _engine_options(values: dict[str, Any], built: dict[str, Any]) -> EngineOptions:
    engine = values["engine"]
    options = EngineOptions(**{**values, "engine": getattr(engine, "value", engine)})
    options.validate()
    return options


ENGINE = FlagGroup("engine", (
    _engine("concurrency", int, DEFAULT_CONCURRENCY, "--concurrency", metavar="N", min=1,
            help="Samples or requests in flight at once (per worker with --engine ray)."),
    _engine("engine", EngineChoice, EngineChoice("local"), "--engine",
            # The brackets escaped: typer renders help as rich markup.
            help="local: this process (default, needs nothing); ray: an actor pool of workers "
            'on a Ray cluster (pip install "sam3-agent\\[ray]").'),
    _engine("ray_address", str | None, None, "--ray-address", metavar="ADDRESS",
            help="Ray cluster to join: auto (the one `ray start` runs here), host:6379 or "
            "ray://host:10001. Default: start a local Ray."),
    _engine("workers", int, 1, "--workers", metavar="N",
            help="Ray workers (actors), each with its own models; e.g. one per GPU."),
    _engine("gpus_per_worker", float, 0.0, "--gpus-per-worker", metavar="GPUS",
            help="GPUs each Ray worker reserves (0 with --sam3-url; 0.5 packs two per GPU)."),
), _engine_options)  # fmt: skip
"""``--concurrency``, ``--engine`` and the Ray flags: validated ``EngineOptions``."""


def _run(*names: str, help: str) -> Any:
    """An option of the Run panel: ``--out`` takes a DIR, the others are flags."""
    metavar = "DIR" if "--out" in names else ""
    return typer.Option(*names, metavar=metavar, help=help, rich_help_panel=RUN_PANEL)


OutDirOpt = Annotated[
    Path,
    _run(
        "--out",
        "-o",
        help="Run directory: the results store, a directory per sample or request, the report "
        "or summary; rerun the same command to resume.",
    ),
]
RetryFailedOpt = Annotated[
    bool, _run("--retry-failed", help="Run again the jobs stored as infrastructure failures.")
]
ProgressOpt = Annotated[bool, _run("--progress/--no-progress", help="Progress bar on stderr.")]
