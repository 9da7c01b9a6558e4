"""The Ray engine against the local one: same results, and resumes after kills.

One local Ray (8 logical CPUs: a 2-CPU Ray can deadlock an actor pool under backpressure; no
dashboard) serves the whole module. Workers load the tiny SAM 3 from disk and talk to the
test MLLM server on 127.0.0.1; both engines must store exactly the same results.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray.data", reason='the Ray engine tests need Ray Data: pip install "sam3-agent[ray]"'
)

from typer.testing import CliRunner  # noqa: E402

from sam3_agent.apps.cli.main import app  # noqa: E402
from sam3_agent.backends.spec import BackendSpec  # noqa: E402
from sam3_agent.runs.batch.requests import load_requests  # noqa: E402
from sam3_agent.runs.batch.results import RequestResult  # noqa: E402
from sam3_agent.runs.batch.workers import BatchWorkerFactory  # noqa: E402
from sam3_agent.runs.jobs.base import EngineOptions  # noqa: E402
from sam3_agent.runs.jobs.driver import run_jobs  # noqa: E402
from sam3_agent.runs.jobs.ray_engine import RayEngine  # noqa: E402
from sam3_agent.runs.jobs.store import ResultStore, reading  # noqa: E402
from sam3_agent.values.config import AgentConfig  # noqa: E402
from sam3_agent.values.errors import EngineError  # noqa: E402
from tests.support.batch_fixtures import respond, write_jsonl  # noqa: E402
from tests.support.engine_workers import KillOnceFactory  # noqa: E402
from tests.support.eval_fixtures import write_refcoco  # noqa: E402
from tests.support.openai_server import ScriptedServer, serve  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


@pytest.fixture(scope="module")
def mllm() -> Iterator[ScriptedServer]:
    with serve(ScriptedServer(responder=respond)) as server:
        yield server


def _backend_flags(sam3_dir: Path, server: ScriptedServer) -> list[str]:
    return [
        "--sam3", str(sam3_dir), "--device", "cpu", "--llm-url", server.base_url,
        "--llm-model", "test-vlm", "--llm-api-key", "k", "--score-threshold", "0.0",
    ]  # fmt: skip


def _stored(run: Path) -> list[dict[str, Any]]:
    """Stored records without the wall-clock fields (they differ run to run)."""
    with reading(run, dict) as store:  # batch and eval records alike, as stored
        rows = []
        for doc in store.results():
            doc.pop("time_s")
            doc["extra"] = {k: v for k, v in doc["extra"].items() if k != "timings_s"}
            rows.append(doc)
        return rows


def _batch(*args: str) -> Any:
    return runner.invoke(app, ["batch", "--no-progress", *args])


@pytest.fixture(scope="module")
def batch_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("batch_input"))


@pytest.fixture(scope="module")
def local_batch(
    tmp_path_factory: pytest.TempPathFactory,
    batch_input: Path,
    tiny_sam3_dir: Path,
    mllm: ScriptedServer,
) -> Path:
    """The local engine's run of the batch input: what every Ray run must reproduce."""
    out = tmp_path_factory.mktemp("local") / "run"
    result = _batch(str(batch_input), "--out", str(out), *_backend_flags(tiny_sam3_dir, mllm))
    assert result.exit_code == 0, result.output
    return out


def test_batch_on_ray_equals_local(
    ray_address: str, tmp_path: Path, batch_input: Path, local_batch: Path,
    tiny_sam3_dir: Path, mllm: ScriptedServer,
) -> None:  # fmt: skip
    out = tmp_path / "ray"
    result = _batch(
        str(batch_input), "--out", str(out), "--engine", "ray", "--workers", "2",
        "--concurrency", "2", *_backend_flags(tiny_sam3_dir, mllm),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "6 run, 0 already stored, 0 failed" in result.stderr
    assert _stored(out) == _stored(local_batch)
    assert {r["status"] for r in _stored(out)} == {"masks"}
    local_summary = (local_batch / "summary.jsonl").read_text().splitlines()
    ray_summary = (out / "summary.jsonl").read_text().splitlines()
    drop = ("time_s",)
    assert [{k: v for k, v in json.loads(x).items() if k not in drop} for x in ray_summary] == [
        {k: v for k, v in json.loads(x).items() if k not in drop} for x in local_summary
    ]
    for row in map(json.loads, ray_summary):
        done = json.loads((out / row["outputs"] / "result.json").read_text())
        want = json.loads((local_batch / row["outputs"] / "result.json").read_text())
        assert done["masks"] == want["masks"]


def test_eval_on_ray_equals_local(ray_address: str, tmp_path: Path, tiny_sam3_dir: Path) -> None:
    root = write_refcoco(tmp_path / "refer")
    common = [
        "eval", "--no-progress", "--dataset", "refcoco", "--root", str(root),
        "--mode", "sam3-only", "--sam3", str(tiny_sam3_dir), "--device", "cpu",
        "--score-threshold", "0.3",
    ]  # fmt: skip
    local = runner.invoke(app, [*common, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    on_ray = runner.invoke(app, [*common, "--out", str(tmp_path / "ray"), "--engine", "ray"])
    assert on_ray.exit_code == 0, on_ray.output
    assert _stored(tmp_path / "ray") == _stored(tmp_path / "local")
    metrics = [
        json.loads((tmp_path / run / "metrics.json").read_text())["methods"][0]["metrics"]
        for run in ("local", "ray")
    ]
    assert metrics[0] == metrics[1]


def test_worker_killed_mid_run_resumes_to_the_same_store(
    ray_address: str, tmp_path: Path, batch_input: Path, local_batch: Path,
    tiny_sam3_dir: Path, mllm: ScriptedServer,
) -> None:  # fmt: skip
    requests = load_requests(batch_input)
    backends = BackendSpec(
        sam3=str(tiny_sam3_dir), device="cpu", llm_url=mllm.base_url, llm_model="test-vlm",
        llm_api_key="k",
    )  # fmt: skip
    inner = BatchWorkerFactory(backends, AgentConfig(score_threshold=0.0))
    marker = tmp_path / "killed"
    factory = KillOnceFactory(inner, victim=requests[3].id, marker=str(marker))
    with reading(local_batch, RequestResult.from_json) as local_store:
        config = local_store.config()
    assert config is not None
    out = tmp_path / "run"
    evaluated = 0
    attempts = 0
    while True:
        attempts += 1
        with ResultStore.create_or_resume(out, config, RequestResult.from_json) as store:
            try:
                outcome = asyncio.run(
                    run_jobs(
                        requests, store, RayEngine(EngineOptions("ray", concurrency=2)), factory
                    )
                )
            except EngineError:
                # Ray gave up on the lost worker's task: a rerun must finish the job.
                evaluated = store.count()
                assert attempts == 1
                continue
        evaluated += outcome.ran
        break
    assert marker.exists()  # the worker really died
    assert evaluated == len(requests)  # nothing counted twice
    assert _stored(out) == _stored(local_batch)


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # not created yet


def test_driver_killed_mid_run_resumes_to_the_same_store(
    ray_address: str, tmp_path: Path, batch_input: Path, local_batch: Path,
    tiny_sam3_dir: Path,
) -> None:  # fmt: skip
    out = tmp_path / "run"
    # A slow MLLM of its own, so the kill lands while requests are in flight.
    with serve(ScriptedServer(responder=respond, latency_s=0.3)) as slow:
        flags = _backend_flags(tiny_sam3_dir, slow)
        env = {
            **os.environ,
            "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "HF_HUB_OFFLINE": "1",
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", "from sam3_agent.apps.cli.main import app; app()", "batch",
             "--no-progress", str(batch_input), "--out", str(out), "--engine", "ray",
             "--ray-address", ray_address, "--concurrency", "1", *flags],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while _count(out / "results.sqlite") < 1 and proc.poll() is None:
                assert time.monotonic() < deadline, "the driver committed nothing in 120 s"
                time.sleep(0.05)
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
        survived = _count(out / "results.sqlite")
        assert 1 <= survived < 6
        result = _batch(str(batch_input), "--out", str(out), "--engine", "ray", *flags)
    assert result.exit_code == 0, result.output
    assert f"{6 - survived} run, {survived} already stored, 0 failed" in result.stderr
    assert _stored(out) == _stored(local_batch)


def test_a_mixed_image_and_video_batch_on_ray_equals_local_after_a_lost_worker(
    ray_address: str, tmp_path: Path
) -> None:
    """Video requests beside image requests on Ray: each worker builds SAM 3's video model
    when its first video arrives, a worker killed in a video request is resumed from the
    store, and the store ends as the local engine's."""
    from sam3_agent.runs.batch.run import batch_settings, run_batch
    from tests.support.video_batch import MixedModels, write_mixed_jsonl

    source = write_mixed_jsonl(tmp_path / "in")
    requests = load_requests(source)
    local = run_batch(requests, tmp_path / "local", MixedModels())
    assert local.run.failed == 0

    models = MixedModels()
    config = AgentConfig()
    inner = BatchWorkerFactory(models, config, images=True, videos=True)
    victim = next(r for r in requests if r.media == "video")
    factory = KillOnceFactory(inner, victim=victim.id, marker=str(tmp_path / "killed"))
    settings = batch_settings(models, config, "scripted")
    out = tmp_path / "ray"
    ran = 0
    for attempt in range(2):
        with ResultStore.create_or_resume(out, settings, RequestResult.from_json) as store:
            try:
                outcome = asyncio.run(
                    run_jobs(
                        requests,
                        store,
                        RayEngine(EngineOptions("ray", workers=2, concurrency=2)),
                        factory,
                    )
                )
            except EngineError:
                assert attempt == 0  # Ray gave up on the lost worker's task: rerun
                ran = store.count()
                continue
        ran += outcome.ran
        break
    assert (tmp_path / "killed").exists()  # the worker really died in a video request
    assert ran == len(requests)  # nothing counted twice
    assert _stored(out) == _stored(tmp_path / "local")
    for row in map(json.loads, (tmp_path / "local" / "summary.jsonl").read_text().splitlines()):
        if "video" in row and row["status"] == "masks":
            assert (out / row["outputs"] / "overlay.mp4").is_file()
