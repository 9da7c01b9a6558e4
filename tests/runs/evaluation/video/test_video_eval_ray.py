"""Video evaluation on the Ray engine stores exactly what the local engine stores.

A Ray worker builds the video agent from the picklable backends value (the fakes of
:mod:`tests.support.video_eval_fixtures`, imported on the worker from this checkout); one small
ReVOS run on each engine, compared record for record and metric for metric.
"""

from __future__ import annotations

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


def test_video_eval_on_ray_equals_local(ray_address: str, tmp_path: Path) -> None:
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
