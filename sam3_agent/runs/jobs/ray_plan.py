"""How a run meets Ray, decided without Ray: the ``ray.init`` arguments for an address,
the line saying which Ray the run uses, and whether the cluster can run the workers asked
for (:mod:`~sam3_agent.runs.jobs.ray_engine` acts on them)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sam3_agent.values.errors import UserError

MIN_LOCAL_CPUS = 8
"""Logical CPUs of a Ray started here. Ray Data's actor pool can deadlock under
backpressure when a small machine declares its 2 real cores (seen with Ray 2.60); the
work is I/O-bound (model servers), so more logical slots than cores is right."""


@dataclass(frozen=True)
class RayConnection:
    """How this process meets Ray for a run.

    Attributes:
        description: one line saying which Ray the run uses (shown to the user).
        private: a Ray started here for this run only (no other machine, no autoscaler).
        notice: a Ray cluster on this machine that is not used.
        pick_up_token: use this machine's Ray token as ``ray.init(address="auto")`` does
            (an explicit ``host:port`` otherwise never does).
    """

    init_args: dict[str, Any]
    description: str
    private: bool = False
    notice: str | None = None
    pick_up_token: bool = False


COMMON_INIT_ARGS: dict[str, Any] = {
    "include_dashboard": False,
    "logging_level": logging.WARNING,
    "configure_logging": False,
    # Workers' and raylet's output (ANSI-coloured, at any moment) would land in the
    # caller's stdout between its results; it stays in Ray's log files on each node.
    "log_to_driver": False,
}


def plan_connection(
    address: str | None,
    *,
    workers: int,
    environ: Mapping[str, str],
    cpu_count: int | None,
    recorded_cluster: str | None,
) -> RayConnection:
    """The ``ray.init`` arguments for ``--ray-address`` (``address``), and what to say.

    None starts a private local Ray (``address="local"``: a cluster ``ray start`` recorded
    on this machine must not turn it into a join, which Ray refuses when CPUs are given),
    unless ``RAY_ADDRESS`` in ``environ`` names a cluster, as it does for every Ray program.
    ``auto`` joins the cluster ``ray start`` runs here; ``ray://...`` joins through Ray
    Client; ``host:port`` joins that cluster, with this machine's token if it has one.

    Args:
        workers: actors the run asks for (a private Ray declares a CPU for each).
        recorded_cluster: the address of the cluster ``ray start`` recorded here, if any.
    """
    if address is None:
        from_env = environ.get("RAY_ADDRESS", "").strip()
        if from_env and from_env != "local":
            joined = plan_connection(
                from_env,
                workers=workers,
                environ={},
                cpu_count=cpu_count,
                recorded_cluster=recorded_cluster,
            )
            return replace(joined, description=f"{joined.description} (from RAY_ADDRESS)")
        # More logical CPUs than cores (see MIN_LOCAL_CPUS), and one per worker asked for
        # plus room for Ray Data's own tasks: --workers is never cut down here.
        cpus = max(MIN_LOCAL_CPUS, cpu_count or 1, workers + 2)
        notice = None
        if recorded_cluster:
            notice = (
                f"a Ray cluster started by `ray start` runs on this machine ({recorded_cluster}); "
                "this run starts its own: pass `ray_address='auto'` to run on that cluster"
            )
        return RayConnection(
            {"address": "local", "num_cpus": cpus, **COMMON_INIT_ARGS},
            f"starting a private local Ray for this run ({cpus} logical CPUs)",
            private=True,
            notice=notice,
        )
    if address == "local":
        return plan_connection(
            None,
            workers=workers,
            environ={},
            cpu_count=cpu_count,
            recorded_cluster=recorded_cluster,
        )
    init_args = {"address": address, **COMMON_INIT_ARGS}
    if address == "auto":
        where = f" ({recorded_cluster})" if recorded_cluster else ""
        return RayConnection(
            init_args, f"joining the Ray cluster `ray start` runs on this machine{where}"
        )
    if address.startswith("ray://"):
        return RayConnection(init_args, f"joining the Ray cluster at {address} through Ray Client")
    return RayConnection(init_args, f"joining the Ray cluster at {address}", pick_up_token=True)


TOKEN_HELP = (
    "set RAY_AUTH_TOKEN to the output of `ray get-auth-token` on the cluster's head node "
    "(or RAY_AUTH_TOKEN_PATH to a copy of its ~/.ray/auth_token)"
)


def check_capacity(
    resources: Mapping[str, float], *, workers: int, gpus_per_worker: float, private: bool
) -> str | None:
    """What to say when the cluster cannot run ``workers`` actors at once (Ray Data would
    silently run fewer); None when it can.

    Each worker takes 1 CPU (Ray Data's default for an actor) and ``gpus_per_worker`` GPUs.
    """
    cpus = float(resources.get("CPU", 0.0))
    fits = [(int(cpus + 1e-9), f"{cpus:g} CPUs (1 per worker)")]
    if gpus_per_worker > 0:
        gpus = float(resources.get("GPU", 0.0))
        fits.append(
            (int(gpus / gpus_per_worker + 1e-9), f"{gpus:g} GPUs ({gpus_per_worker:g} per worker)")
        )
    fit, why = min(fits, key=lambda f: f[0])
    if workers <= fit:
        return None
    if fit == 0 and private:
        raise UserError(
            f"`workers={workers}` `gpus_per_worker={gpus_per_worker:g}`: this machine's Ray has "
            f"{why.split(' (')[0]}, so no worker can start"
        )
    return (
        f"`workers={workers}`: the Ray cluster has {why}, so at most {fit} of them run at "
        "once (the others wait for room)"
    )
