"""The engine flags ``eval`` and ``batch`` share: where the work runs.

Each command declares ``engine: EngineOpt = "local"`` etc. and builds
:class:`~sam3_agent.runs.jobs.base.EngineOptions` with :func:`engine_options`.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from sam3_agent.runs.jobs.base import EngineOptions

ENGINE = "Engine"


class EngineChoice(str, Enum):
    local = "local"
    ray = "ray"


EngineOpt = Annotated[
    EngineChoice,
    typer.Option(
        "--engine",
        help="local: this process (default, needs nothing); ray: an actor pool of workers "
        'on a Ray cluster (pip install "sam3-agent\\[ray]").',
        rich_help_panel=ENGINE,
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to join: auto (the one `ray start` runs here), host:6379 or "
        "ray://host:10001. Default: start a local Ray.",
        rich_help_panel=ENGINE,
    ),
]
WorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers",
        help="Ray workers (actors), each with its own models; e.g. one per GPU.",
        rich_help_panel=ENGINE,
    ),
]
GpusPerWorkerOpt = Annotated[
    float,
    typer.Option(
        "--gpus-per-worker",
        help="GPUs each Ray worker reserves (0 with --sam3-url; 0.5 packs two per GPU).",
        rich_help_panel=ENGINE,
    ),
]


def engine_options(
    *,
    engine: EngineChoice | str,
    concurrency: int,
    ray_address: str | None,
    workers: int,
    gpus_per_worker: float,
) -> EngineOptions:
    """The validated engine options.

    Raises:
        UserError: a flag that is out of range or does not apply to the engine.
    """
    options = EngineOptions(
        engine=engine.value if isinstance(engine, EngineChoice) else engine,
        concurrency=concurrency,
        ray_address=ray_address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
    )
    options.validate()
    return options
