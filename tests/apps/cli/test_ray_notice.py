"""``eval`` and ``batch`` say which Ray runs the work by default, on stderr beside the
progress (plain text), not only in the INFO log. Ray itself is faked: no cluster needed."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.apps.cli.progress import BatchTally, PlainProgress, ProgressBar
from sam3_agent.runs.jobs import ray_engine
from sam3_agent.runs.jobs.ray_engine import RayEngine
from tests.support.batch_fixtures import write_jsonl
from tests.support.fake_ray import FakeRay


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setattr(ray_engine, "import_ray", lambda: fake)
    monkeypatch.setattr(ray_engine, "_recorded_cluster", lambda: None)
    monkeypatch.setattr(ray_engine, "_pick_up_token", lambda: None)
    monkeypatch.setattr(RayEngine, "_rows", lambda self, work: iter(()))  # no worker runs
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake


def test_batch_on_ray_says_which_ray_by_default(fake_ray: FakeRay, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "input")
    args = ["batch", str(source), "--out", str(tmp_path / "out"), "--engine", "ray"]
    args += ["--workers", "6", "--sam3-url", "http://127.0.0.1:9"]
    args += ["--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"]
    result = CliRunner().invoke(app, args)
    assert fake_ray.calls, result.output
    lines = result.stderr.splitlines()
    which = [line for line in lines if "private local Ray" in line]
    assert which == [f"starting a private local Ray for this run ({which[0].split('(')[1]}"]
    assert "warning: --workers 6: the Ray cluster has 4 CPUs" in result.stderr
    assert "INFO" not in result.stderr and "WARNING" not in result.stderr  # not log lines


@pytest.mark.parametrize("live", [False, True], ids=["plain", "bar"])
def test_progress_shows_notices_as_plain_text(live: bool) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=live, highlight=False)
    kind = ProgressBar if live else PlainProgress
    progress = kind(console, "batch", BatchTally())
    progress.start(1, [])
    progress.notice('joining the Ray cluster at [/x] "sam3-agent[ray]"')
    progress.notice("only 2 of 4 workers fit", warning=True)
    progress.stop()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())  # colours, cursor
    assert 'joining the Ray cluster at [/x] "sam3-agent[ray]"' in text
    assert "warning: only 2 of 4 workers fit" in text
