"""The engine interface without Ray: options, the local engine, the driver, the Ray UDF."""

from __future__ import annotations

import ast
import asyncio
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.jobs.base import EngineOptions, ImageSource, Prebuilt
from sam3_agent.runs.jobs.driver import build_engine, pending_jobs, run_jobs
from sam3_agent.runs.jobs.local import LocalEngine
from sam3_agent.runs.jobs.ray_engine import RayEngine, RayWorker, image_groups, import_ray
from sam3_agent.runs.jobs.store import ResultStore
from sam3_agent.values.errors import DatasetError, ImageLoadError, UserError

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class ShapeResult:
    """A record type of the tests' own: the jobs layer stores any kind of record."""

    id: str
    status: str
    infra_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ShapeResult:
        return cls(**doc)


def _result(job: BatchRequest, status: str = "masks", **extra: Any) -> ShapeResult:
    return ShapeResult(job.id, status, infra_error=status == "failed", extra=dict(extra))


def _store(run_dir: Path) -> ResultStore[ShapeResult]:
    return ResultStore.create_or_resume(run_dir, {"t": 1}, ShapeResult.from_json)


@dataclass
class ShapeHandler:
    """Reports each job's image shape; fails the job whose query is ``fail``."""

    stop_on: str | None = None
    released: list[str] = field(default_factory=list)
    running: int = 0
    peak: int = 0

    async def run(self, job: BatchRequest, images: ImageSource) -> ShapeResult:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if job.query == self.stop_on:
                raise DatasetError(f"broken input at {job.id}")
            try:
                image = await images.get(job.image_path)
            except ImageLoadError as e:
                return _result(job, "failed", error=str(e))
            await asyncio.sleep(0.01)
            return _result(job, shape=list(image.shape))
        finally:
            self.running -= 1

    def release(self, digest: str) -> None:
        self.released.append(digest)


def _images(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"img{i}.png"
        Image.fromarray(np.full((10 + i, 12, 3), 40 * i, dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def _jobs(paths: Sequence[Path], per_image: int) -> list[BatchRequest]:
    return [
        BatchRequest(id=f"{p.stem}#{k}", image_path=p, query=f"q{k}")
        for k in range(per_image)
        for p in paths
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (EngineOptions(engine="spark"), "`engine` must be one of local, ray"),
        (EngineOptions(concurrency=0), "`concurrency` must be >= 1"),
        (EngineOptions(workers=0), "`workers` must be >= 1"),
        (EngineOptions(workers=2), "`workers` applies to `engine='ray'`"),
        (EngineOptions(ray_address="auto"), "`ray_address` applies to `engine='ray'`"),
        (EngineOptions(gpus_per_worker=1), "`gpus_per_worker` applies to `engine='ray'`"),
        (EngineOptions(engine="ray", gpus_per_worker=-1), "`gpus_per_worker` must be >= 0"),
    ],
)
def test_engine_options_name_the_wrong_setting(options: EngineOptions, message: str) -> None:
    with pytest.raises(UserError, match=message):
        options.validate()


def test_build_engine_picks_the_engine_without_importing_ray() -> None:
    assert isinstance(build_engine(EngineOptions()), LocalEngine)
    options = EngineOptions(engine="ray", workers=4, gpus_per_worker=0.5, concurrency=3)
    ray = build_engine(options)
    assert isinstance(ray, RayEngine) and ray.options == options


def test_missing_ray_is_a_user_error_saying_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(UserError, match=r"sam3-agent\[ray\]"):
        import_ray()


def test_only_the_ray_engine_imports_ray() -> None:
    """``import ray`` appears in one module, inside functions: ``--help`` never pays for it."""
    package = REPO / "sam3_agent"
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "ray" or n.startswith("ray.") for n in names):
                found.append((path.relative_to(package).as_posix(), node.col_offset > 0))
    assert found, "the Ray engine must import ray somewhere"
    assert {where for where, _ in found} == {"runs/jobs/ray_engine.py"}
    assert all(nested for _, nested in found)  # inside a function, never at module level


def test_local_engine_runs_every_job_and_reads_each_image_once(tmp_path: Path) -> None:
    paths = _images(tmp_path / "img", 3)
    jobs = _jobs(paths, per_image=3)
    handler = ShapeHandler()
    with _store(tmp_path / "run") as store:
        outcome = asyncio.run(run_jobs(jobs, store, LocalEngine(concurrency=4), Prebuilt(handler)))
        stored = {r.id: r for r in store.results()}
    assert (outcome.total, outcome.ran, outcome.skipped, outcome.failed) == (9, 9, 0, 0)
    assert stored["img2#1"].extra == {"shape": [12, 12, 3]}
    assert len(handler.released) == 3  # each image released once, after its last job
    assert 1 < handler.peak <= 4


def test_the_outcome_carries_wall_time_and_throughput(tmp_path: Path) -> None:
    """Wall time of the whole run, not a sum of per-job times; from an injected clock."""
    jobs = _jobs(_images(tmp_path / "img", 2), per_image=3)
    ticks = iter([100.0, 104.0, 200.0, 200.5])
    with _store(tmp_path / "run") as store:
        engine = LocalEngine(concurrency=3)
        outcome = asyncio.run(
            run_jobs(jobs, store, engine, Prebuilt(ShapeHandler()), clock=lambda: next(ticks))
        )
        nothing = asyncio.run(
            run_jobs(jobs, store, engine, Prebuilt(ShapeHandler()), clock=lambda: next(ticks))
        )
    assert (outcome.ran, outcome.wall_s, outcome.per_second) == (6, 4.0, 1.5)
    assert (nothing.ran, nothing.wall_s, nothing.per_second) == (0, 0.5, None)


def test_rerun_skips_stored_jobs_and_retries_failed_ones(tmp_path: Path) -> None:
    paths = _images(tmp_path / "img", 2)
    jobs = [*_jobs(paths, per_image=1), BatchRequest("gone", tmp_path / "gone.png", "q")]
    run = tmp_path / "run"
    engine = LocalEngine(concurrency=2)
    with _store(run) as store:
        first = asyncio.run(run_jobs(jobs, store, engine, Prebuilt(ShapeHandler())))
        again = asyncio.run(run_jobs(jobs, store, engine, Prebuilt(ShapeHandler())))
        retried = asyncio.run(
            run_jobs(jobs, store, engine, Prebuilt(ShapeHandler()), retry_failed=True)
        )
        assert store.count() == 3
    assert (first.ran, first.failed) == (3, 1)
    assert (again.ran, again.skipped) == (0, 3)
    assert (retried.ran, retried.skipped, retried.failed) == (1, 2, 1)


def test_pending_jobs_are_grouped_by_image(tmp_path: Path) -> None:
    paths = _images(tmp_path / "img", 2)
    jobs = _jobs(paths, per_image=2)  # interleaved: img0#0, img1#0, img0#1, img1#1
    with _store(tmp_path / "run") as store:
        store.commit(_result(jobs[0]))
        todo = pending_jobs(jobs, store)
    assert [j.id for j in todo] == ["img0#1", "img1#0", "img1#1"]
    assert [[j.id for j in g] for g in image_groups(todo)] == [["img0#1"], ["img1#0", "img1#1"]]


class EchoTwice:
    """An engine that reports every result twice and one result nobody asked for."""

    name = "echo"

    async def run(self, work: Any, on_result: Any) -> None:
        for job in work.jobs:
            on_result(_result(job))
            on_result(_result(job))
        on_result(_result(BatchRequest("stranger", Path("x.png"), "q")))


def test_a_result_reported_twice_or_unasked_is_never_counted(tmp_path: Path) -> None:
    jobs = _jobs(_images(tmp_path / "img", 2), per_image=1)
    with _store(tmp_path / "run") as store:
        outcome = asyncio.run(run_jobs(jobs, store, EchoTwice(), Prebuilt(ShapeHandler())))
        assert store.finished_ids() == {"img0#0", "img1#0"}
    assert outcome.ran == 2


def test_a_handler_error_stops_the_local_run_keeping_commits(tmp_path: Path) -> None:
    paths = _images(tmp_path / "img", 3)
    jobs = [BatchRequest("a", paths[0], "q"), BatchRequest("b", paths[1], "fail")]
    with _store(tmp_path / "run") as store:
        with pytest.raises(DatasetError, match="broken input at b"):
            asyncio.run(
                run_jobs(jobs, store, LocalEngine(concurrency=1), Prebuilt(ShapeHandler("fail")))
            )
        assert store.finished_ids() == {"a"}


@dataclass(frozen=True)
class ShapeFactory:
    stop_on: str | None = None
    broken: bool = False

    def build(self, run_dir: Path) -> ShapeHandler:
        if self.broken:
            raise UserError("weights are missing")
        return ShapeHandler(self.stop_on)


def test_ray_worker_udf_returns_records_and_errors_as_rows(tmp_path: Path) -> None:
    """The UDF each Ray actor runs, called directly: no Ray needed."""
    paths = _images(tmp_path / "img", 2)
    groups = image_groups(_jobs(paths[:1], per_image=3))
    payload = {"jobs": [pickle.dumps(g) for g in groups]}

    def rows(factory: ShapeFactory, concurrency: int) -> list[Any]:
        worker = RayWorker(factory, str(tmp_path), concurrency=concurrency)
        return [pickle.loads(row) for row in asyncio.run(worker(payload))["item"]]

    records = rows(ShapeFactory(), 2)
    assert sorted(r.id for r in records) == ["img0#0", "img0#1", "img0#2"]
    assert all(isinstance(r, ShapeResult) for r in records)

    *done, error = rows(ShapeFactory(stop_on="q1"), 1)
    assert [r.id for r in done] == ["img0#0"]
    assert isinstance(error, DatasetError) and "img0#1" in str(error)

    [error] = rows(ShapeFactory(broken=True), 1)
    assert isinstance(error, UserError) and "weights are missing" in str(error)


@pytest.mark.parametrize("command", ["eval", "batch"])
def test_eval_and_batch_share_the_engine_flags(tmp_path: Path, command: str) -> None:
    from typer.testing import CliRunner

    from sam3_agent.apps.cli.main import app
    from tests.support.eval_fixtures import write_reasonseg

    _images(tmp_path / "img", 1)
    if command == "eval":
        root = write_reasonseg(tmp_path / "rs")
        target = ["eval", "--dataset", "reasonseg", "--root", str(root)]
    else:
        target = ["batch", str(tmp_path / "img"), "--query", "q"]
    common = [*target, "--no-progress", "--out", str(tmp_path / "out")]
    cases = [
        (["--workers", "3"], "--workers applies to --engine ray"),
        (["--gpus-per-worker", "1"], "--gpus-per-worker applies to --engine ray"),
        (["--engine", "ray", "--workers", "0"], "--workers must be >= 1"),
        (["--engine", "ray"], "--engine ray loads the MLLM"),
    ]
    for flags, message in cases:
        result = CliRunner().invoke(app, [*common, *flags])
        assert result.exit_code == 2, (flags, result.output)
        assert message in result.stderr, (flags, result.stderr)
    assert not (tmp_path / "out").exists()
