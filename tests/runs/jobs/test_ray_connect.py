"""How the Ray engine meets Ray: which ``ray.init`` for which ``--ray-address``, what it says.

No cluster is needed: ``ray.init`` is replaced by a recorder, so these run without Ray too.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from sam3_agent.runs.jobs import ray_engine
from sam3_agent.runs.jobs.base import EngineOptions, Work
from sam3_agent.runs.jobs.ray_engine import (
    MIN_LOCAL_CPUS,
    RayConnection,
    RayEngine,
    check_capacity,
    connect,
    plan_connection,
)
from sam3_agent.values.errors import UserError
from tests.support.fake_ray import FakeRay

CLUSTER = "10.0.0.5:6379"


def _plan(address: str | None, **kw: Any) -> RayConnection:
    args: dict[str, Any] = {
        "workers": 1,
        "environ": {},
        "cpu_count": 2,
        "recorded_cluster": None,
        **kw,
    }
    return plan_connection(address, **args)


def _ray(**options: Any) -> EngineOptions:
    return EngineOptions(engine="ray", **options)


def test_no_address_starts_a_private_ray_even_beside_a_ray_start_cluster() -> None:
    """``ray.init(num_cpus=...)`` would join the recorded cluster and refuse the CPUs."""
    plan = _plan(None, recorded_cluster="127.0.0.1:6379")
    assert plan.private and plan.init_args["address"] == "local"
    assert plan.init_args["num_cpus"] == MIN_LOCAL_CPUS
    assert plan.init_args["log_to_driver"] is False  # stdout stays the caller's
    assert plan.description.startswith("starting a private local Ray")
    assert plan.notice is not None and "`ray_address='auto'`" in plan.notice
    assert _plan(None).notice is None
    assert _plan("local").init_args == _plan(None).init_args


def test_a_private_ray_has_a_cpu_for_every_worker_asked_for() -> None:
    plan = _plan(None, workers=30, cpu_count=16)
    assert plan.init_args["num_cpus"] >= 31
    resources = {"CPU": plan.init_args["num_cpus"]}
    assert check_capacity(resources, _ray(workers=30), private=True) is None


@pytest.mark.parametrize(
    ("address", "token", "says"),
    [
        ("auto", False, "joining the Ray cluster `ray start` runs on this machine"),
        ("ray://head:10001", False, "through Ray Client"),
        (CLUSTER, True, f"joining the Ray cluster at {CLUSTER}"),
    ],
)
def test_an_address_joins_that_cluster_without_resources(
    address: str, token: bool, says: str
) -> None:
    plan = _plan(address)
    assert plan.init_args["address"] == address and "num_cpus" not in plan.init_args
    assert not plan.private and plan.pick_up_token is token
    assert says in plan.description
    assert plan.init_args["log_to_driver"] is False


def test_ray_address_in_the_environment_is_joined_and_said() -> None:
    plan = _plan(None, environ={"RAY_ADDRESS": CLUSTER})
    assert plan.init_args["address"] == CLUSTER and "num_cpus" not in plan.init_args
    assert plan.pick_up_token and plan.description.endswith("(from RAY_ADDRESS)")
    assert _plan(None, environ={"RAY_ADDRESS": "local"}).private


class AuthenticationError(Exception):
    """Named like Ray's own (ray.exceptions.AuthenticationError)."""


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setattr(ray_engine, "import_ray", lambda: fake)
    monkeypatch.setattr(ray_engine, "_recorded_cluster", lambda: "127.0.0.1:6379")
    monkeypatch.setattr(ray_engine, "_pick_up_token", lambda: None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake


def test_connect_says_which_ray_in_one_line(
    fake_ray: FakeRay, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ray_engine.__name__)
    plan = connect(None, workers=2)
    assert plan is not None and fake_ray.calls == [plan.init_args]
    assert fake_ray.calls[0]["address"] == "local"
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert lines[0] == (logging.INFO, plan.description)
    assert lines[1][0] == logging.WARNING and "127.0.0.1:6379" in lines[1][1]
    assert connect(None) is None  # already joined: nothing again
    assert len(fake_ray.calls) == 1


def test_a_token_the_cluster_wants_is_one_line_saying_what_to_set(fake_ray: FakeRay) -> None:
    fake_ray.error = AuthenticationError("Token authentication is enabled but no\ntoken")
    with pytest.raises(UserError) as refused:
        connect(CLUSTER)
    message = str(refused.value)
    assert "\n" not in message and f"at {CLUSTER}" in message
    assert "RAY_AUTH_TOKEN" in message and "ray get-auth-token" in message


def test_no_answer_without_a_local_token_names_the_token_too(fake_ray: FakeRay) -> None:
    fake_ray.error = ConnectionError(f"Failed to connect to Ray cluster at {CLUSTER}")
    with pytest.raises(UserError, match=r"cannot start or join Ray at .*RAY_AUTH_TOKEN"):
        connect(CLUSTER)
    fake_ray.calls.clear()
    with pytest.raises(UserError) as refused:
        connect("auto")  # Ray picks the token up itself there
    assert "RAY_AUTH_TOKEN" not in str(refused.value)


def test_the_host_port_form_picks_up_this_machines_token(
    fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked: list[str] = []
    monkeypatch.setattr(ray_engine, "_pick_up_token", lambda: picked.append("token") or True)
    connect(CLUSTER)
    connect_auto = FakeRay()
    monkeypatch.setattr(ray_engine, "import_ray", lambda: connect_auto)
    connect("auto")
    assert picked == ["token"]  # host:port only: auto does it inside Ray


@pytest.mark.parametrize(
    ("resources", "workers", "gpus", "expected"),
    [
        ({"CPU": 8.0}, 8, 0.0, None),
        (
            {"CPU": 4.0},
            8,
            0.0,
            "`workers=8`: the Ray cluster has 4 CPUs (1 per worker), so at most 4",
        ),
        ({"CPU": 16.0, "GPU": 1.0}, 3, 0.5, "has 1 GPUs (0.5 per worker), so at most 2"),
        ({"CPU": 16.0}, 2, 1.0, "so at most 0"),
    ],
)
def test_workers_beyond_the_cluster_are_said(
    resources: dict[str, float], workers: int, gpus: float, expected: str | None
) -> None:
    said = check_capacity(resources, _ray(workers=workers, gpus_per_worker=gpus), private=False)
    if expected is None:
        assert said is None
    else:
        assert said is not None and expected in said


def test_a_private_ray_with_no_room_for_a_worker_is_refused() -> None:
    with pytest.raises(UserError, match="no worker can start"):
        check_capacity({"CPU": 8.0}, _ray(gpus_per_worker=1.0), private=True)


def test_the_engine_warns_before_it_runs_fewer_workers(
    fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(RayEngine, "_rows", lambda self, work: iter(()))
    engine = RayEngine(_ray(ray_address=CLUSTER, workers=6))
    asyncio.run(engine.run(Work([], None, Path(".")), lambda result: None))  # type: ignore[arg-type]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "`workers=6`: the Ray cluster has 4 CPUs (1 per worker), so at most 4 of them run "
        "at once (the others wait for room)"
    ]


def test_which_ray_and_the_warnings_go_to_the_runs_notices_in_order(
    fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the log (INFO, hidden by default): ``eval`` and ``batch`` show them."""
    monkeypatch.setattr(RayEngine, "_rows", lambda self, work: iter(()))
    said: list[tuple[str, bool]] = []

    def notify(line: str, *, warning: bool = False) -> None:
        said.append((line, warning))

    work = Work([], None, Path("."), notify)  # type: ignore[arg-type]
    asyncio.run(RayEngine(_ray(workers=6)).run(work, lambda result: None))
    assert [warning for _, warning in said] == [False, True, True]
    assert said[0][0].startswith("starting a private local Ray for this run")
    assert "`ray_address='auto'`" in said[1][0]  # the ray start cluster left unused
    assert said[2][0].startswith("`workers=6`: the Ray cluster has 4 CPUs")


def test_the_driver_hands_the_engines_notices_to_the_progress_listener(tmp_path: Path) -> None:
    from sam3_agent.runs.jobs.driver import run_jobs
    from sam3_agent.runs.jobs.store import ResultStore

    class Noisy:
        name = "noisy"

        async def run(self, work: Work[Any, Any], on_result: Any) -> None:
            assert work.notify is not None
            work.notify("which engine")
            work.notify("careful", warning=True)

    class Listener:
        def __init__(self) -> None:
            self.notices: list[tuple[str, bool]] = []

        def start(self, total: int, already_done: Any) -> None:
            pass

        def update(self, result: Any) -> None:
            pass

        def notice(self, line: str, *, warning: bool = False) -> None:
            self.notices.append((line, warning))

    class Job:
        id = "j"
        image_path = tmp_path / "a.png"

    listener = Listener()
    store: ResultStore[Any] = ResultStore.create_or_resume(tmp_path / "run", {}, lambda d: d)
    asyncio.run(run_jobs([Job()], store, Noisy(), None, progress=listener))  # type: ignore[arg-type]
    assert listener.notices == [("which engine", False), ("careful", True)]
