"""Batch throughput: the local engine vs Ray with 1 and 2 workers, side by side in one run.

Every engine runs the same requests through the real ``batch`` code path (request loader,
worker factory, driver, store) with the tiny random SAM 3 of ``tests/support/tiny_sam3.py`` loaded
from disk and the scripted OpenAI-compatible server of ``tests/support/openai_server.py`` answering
every MLLM call after ``--latency`` seconds (two calls per request). Each engine keeps
``--concurrency`` requests in flight per worker.

    python -m scripts.bench batch [--requests 48] [--latency 0.25] [--concurrency 4]

Prints, per engine: wall time including start-up (Ray: actors, model loads), requests per
second over that wall time and in the steady state (first to last result), and each rate's
ratio to the local engine; then whether every engine stored identical results. Needs
``ray[data]`` for the Ray rows (skipped with a note otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Ray workers are new processes: they must import this checkout, offline.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
)
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from sam3_agent.backends.spec import BackendSpec  # noqa: E402
from sam3_agent.runs.batch.requests import BatchRequest, load_requests  # noqa: E402
from sam3_agent.runs.batch.results import RequestResult  # noqa: E402
from sam3_agent.runs.batch.workers import BatchWorkerFactory  # noqa: E402
from sam3_agent.runs.jobs.base import EngineOptions  # noqa: E402
from sam3_agent.runs.jobs.driver import build_engine, run_jobs  # noqa: E402
from sam3_agent.runs.jobs.store import ResultStore  # noqa: E402
from sam3_agent.values.config import AgentConfig  # noqa: E402
from tests.support.batch_fixtures import respond  # noqa: E402
from tests.support.openai_server import ScriptedServer, serve  # noqa: E402
from tests.support.tiny_sam3 import save_tiny_sam3  # noqa: E402

QUERIES = ("red block", "blue stripe", "thing")


@dataclass
class Clock:
    """A progress listener noting when each result was committed."""

    times: list[float] = field(default_factory=list)

    def start(self, total: int, already_done: Sequence[RequestResult]) -> None:
        pass

    def update(self, result: RequestResult) -> None:
        self.times.append(time.perf_counter())


@dataclass(frozen=True)
class Row:
    label: str
    wall_s: float
    rate: float
    steady_rate: float


def write_requests(folder: Path, count: int) -> list[BatchRequest]:
    images = folder / "images"
    images.mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = []
    for i in range((count + len(QUERIES) - 1) // len(QUERIES)):
        pixels = (rng.random((96, 128, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(images / f"img{i:03d}.png")
        lines += [json.dumps({"image": f"images/img{i:03d}.png", "query": q}) for q in QUERIES]
    path = folder / "requests.jsonl"
    path.write_text("\n".join(lines[:count]) + "\n")
    return load_requests(path)


def run_engine(
    options: EngineOptions, requests: list[BatchRequest], factory: BatchWorkerFactory, out: Path
) -> tuple[float, float, list[dict[str, Any]]]:
    clock = Clock()
    with ResultStore.create_or_resume(
        out, {"bench": options.engine}, RequestResult.from_json
    ) as store:
        started = time.perf_counter()
        asyncio.run(run_jobs(requests, store, build_engine(options), factory, progress=clock))
        wall = time.perf_counter() - started
        stored = [{k: v for k, v in r.to_json().items() if k != "time_s"} for r in store.results()]
    for doc in stored:
        doc["extra"] = {k: v for k, v in doc["extra"].items() if k != "timings_s"}
    first_to_last = clock.times[-1] - clock.times[0]
    steady = (len(clock.times) - 1) / first_to_last if first_to_last > 0 else float("nan")
    return wall, steady, stored


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per MLLM call")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per worker")
    args = parser.parse_args(argv)
    have_ray = importlib.util.find_spec("ray") is not None

    with (
        tempfile.TemporaryDirectory() as tmp_name,
        serve(ScriptedServer(responder=respond, latency_s=args.latency)) as server,
    ):
        tmp = Path(tmp_name)
        requests = write_requests(tmp / "in", args.requests)
        backends = BackendSpec(
            sam3=str(save_tiny_sam3(tmp / "sam3")),
            device="cpu",
            llm_url=server.base_url,
            llm_model="bench-vlm",
            llm_api_key="k",
        )
        factory = BatchWorkerFactory(backends, AgentConfig(score_threshold=0.0, max_rounds=5))
        plans = [("local", EngineOptions(concurrency=args.concurrency))]
        ray_start_s = None
        if have_ray:
            from sam3_agent.runs.jobs.ray_engine import connect

            started = time.perf_counter()
            connect(None)
            ray_start_s = time.perf_counter() - started
            plans += [
                (f"ray, {n} worker{'s' if n > 1 else ''}",
                 EngineOptions(engine="ray", workers=n, concurrency=args.concurrency))
                for n in (1, 2)
            ]  # fmt: skip
        rows: list[Row] = []
        results: list[list[dict[str, Any]]] = []
        for i, (label, options) in enumerate(plans):
            wall, steady, stored = run_engine(options, requests, factory, tmp / f"run{i}")
            rows.append(Row(label, wall, len(requests) / wall, steady))
            results.append(stored)

    base = rows[0]
    print(
        f"{len(requests)} requests, 2 MLLM calls each at {args.latency * 1000:.0f} ms "
        f"(scripted HTTP server), tiny SAM 3 on the CPU, {args.concurrency} in flight per worker"
    )
    print(
        f"{'engine':<16} {'wall s':>7} {'req/s':>7} {'ratio':>6} {'steady req/s':>13} {'ratio':>6}"
    )
    for row in rows:
        print(
            f"{row.label:<16} {row.wall_s:7.2f} {row.rate:7.2f} {row.rate / base.rate:5.2f}x "
            f"{row.steady_rate:13.2f} {row.steady_rate / base.steady_rate:5.2f}x"
        )
    if ray_start_s is not None:
        print(f"starting the local Ray itself: {ray_start_s:.1f} s (not in the rows above)")
    else:
        print('Ray rows skipped: pip install "sam3-agent[ray]"')
    same = all(
        json.dumps(r, sort_keys=True) == json.dumps(results[0], sort_keys=True) for r in results
    )
    print(f"results identical across engines: {same}")


if __name__ == "__main__":
    main()
