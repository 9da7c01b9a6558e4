"""Video evaluation on the Ray engine stores exactly what the local engine stores.

A Ray worker builds the video agent from the picklable backends value (the fakes of
:mod:`tests.support.video_eval_fixtures`, imported on the worker from this checkout); one small
ReVOS run on each engine, compared record for record and metric for metric.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "ray.data", reason='the Ray engine tests need Ray Data: pip install "sam3-agent[ray]"'
)

from sam3_agent.runs.evaluation.run import evaluate
from sam3_agent.runs.evaluation.selection import VideoEvalSet
from sam3_agent.runs.jobs.base import EngineOptions
from tests.support.video_eval_fixtures import (
    FakeVideoBackends,
    metrics,
    stored,
    write_revos_videos,
)

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray whose workers import this checkout (tests.support too); one already
    started by another module of the session is used as it is."""
    import ray

    if ray.is_initialized():
        yield
        return
    with pytest.MonkeyPatch.context() as env:  # Ray's processes keep what they start with
        pythonpath = os.environ.get("PYTHONPATH")
        env.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), pythonpath) if p))
        # address="local": a `ray start` cluster recorded on this machine must not be joined;
        # 8 logical CPUs: a 2-CPU Ray can deadlock an actor pool under backpressure.
        ray.init(address="local", num_cpus=8, include_dashboard=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def test_video_eval_on_ray_equals_local(local_ray: None, tmp_path: Path) -> None:
    root = write_revos_videos(tmp_path / "data", ("r1", "r2"))
    selection = VideoEvalSet("revos", root)
    local = evaluate(selection, tmp_path / "local", FakeVideoBackends())
    on_ray = evaluate(
        selection,
        tmp_path / "ray",
        FakeVideoBackends(),
        engine=EngineOptions(engine="ray", workers=1, concurrency=2),
    )
    assert (on_ray.run.ran, on_ray.run.failed) == (local.run.ran, 0) == (6, 0)
    assert stored(tmp_path / "ray") == stored(tmp_path / "local")
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "local")
    # The workers wrote each sample's agent files under the run directory.
    assert len(list((tmp_path / "ray" / "samples").glob("*/result.json"))) == 6
