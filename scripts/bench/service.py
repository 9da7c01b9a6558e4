"""Benchmark: the SAM 3 service's peak memory at 5 vs 50 concurrent clients.

For each scenario and client count a fresh server process serves the app of
:mod:`sam3_agent.apps.service.app` on 127.0.0.1 with the fake segmenter of
``tests/support/fakes.py`` (three full-size square masks for every phrase: what the service
holds and encodes, without a model). After one warm-up request, the server's peak RSS
(``VmHWM``, reset to the current RSS through ``/proc/PID/clear_refs``) is measured while N
clients send their request at the same moment (a barrier); the figure is that peak minus
the RSS before. Clients retry a 503 after its ``Retry-After``, as ``RemoteSegmenter`` does.

Scenarios (the issue's): ``upload`` (``POST /v1/images`` of a 12 MP JPEG photo of about
3.8 MB), ``inline`` (a segment request carrying it as base64), ``stored`` (a segment request
of 4 phrases on one image uploaded before). Every client sends the same image, so the image
store holds one image: what grows with the clients is what requests hold in flight. Goal:
the 50-client figure within ~1.5x of the 5-client one (memory independent of the clients).

    python -m scripts.bench service [--clients 5,50] [--megapixels 12] [--scenarios ...]
    python -m scripts.bench service --package-root DIR   # measure another checkout's app

``--package-root`` puts that directory's ``sam3_agent`` first on the server's path (e.g. a
``git archive main sam3_agent`` extract, for the figure before a change); limits its
``create_app`` (or its ``ServiceLimits``) does not take are left out. Linux only
(``/proc``). About a minute.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import inspect
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("upload", "inline", "stored")
PHRASES = ["a cat", "the red car", "person on the left", "a dog"]
MIB = 1024 * 1024
_PACKAGE_ROOT_ENV = "SAM3_BENCH_PACKAGE_ROOT"


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _photo(megapixels: float, noise: float) -> tuple[bytes, tuple[int, int]]:
    """A phone-photo-like JPEG (4:3, quality 90): a smooth scene plus sensor-like noise.
    12 MP with noise 10 is about 3.8 MB, and decodes to 36 MB (the issue's upload)."""
    import cv2

    pixels = megapixels * 1e6
    width = round((pixels * 4 / 3) ** 0.5)
    height = round(pixels / width)
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    scene = np.stack(
        [
            255 * ys * np.ones_like(xs),
            127 + 127 * np.sin(12 * xs + 7 * ys),
            127 + 127 * np.cos(36 * xs * ys),
        ],
        axis=-1,
    )
    grain = np.random.default_rng(0).normal(0.0, noise, scene.shape).astype(np.float32)
    image = np.clip(scene + grain, 0, 255).astype(np.uint8)
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise RuntimeError("could not encode the benchmark image")
    return buf.tobytes(), (height, width)


# --- the server process ---------------------------------------------------------------------


def serve(limits: dict[str, Any]) -> None:
    """Serve the app with a fake segmenter on a free loopback port; print the port."""
    other = os.environ.get(_PACKAGE_ROOT_ENV)
    if other:  # before the checkout's own directory, which ``-m`` puts first
        sys.path.insert(0, other)
    import uvicorn

    from sam3_agent.apps.service.app import create_app
    from sam3_agent.values.detections import Detections
    from tests.support.fakes import FakeSegmenter, square_mask

    print(f"serving {Path(inspect.getfile(create_app)).parents[3]}", file=sys.stderr)

    def three_squares(image: np.ndarray) -> Detections:
        h, w = int(image.shape[0]), int(image.shape[1])
        side = max(1, min(h, w) // 4)
        masks = np.stack([square_mask(h, w, side * i // 2, side * i, side) for i in range(3)])
        return Detections.from_masks(masks, [0.9, 0.8, 0.7])

    accepted: Any = inspect.signature(create_app).parameters
    if "limits" in accepted:  # one ServiceLimits; an older checkout takes them as keywords
        from sam3_agent.apps.service.limits import ServiceLimits

        fields = {f.name for f in dataclasses.fields(ServiceLimits)}
        kept = {name: value for name, value in limits.items() if name in fields}
        options: dict[str, Any] = {"limits": ServiceLimits(**kept)}
    else:
        options = {name: value for name, value in limits.items() if name in accepted}
    app = create_app(FakeSegmenter(default=three_squares), **options)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off")
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started:
            time.sleep(0.01)
        print(server.servers[0].sockets[0].getsockname()[1], flush=True)

    threading.Thread(target=announce, daemon=True).start()
    server.run()


# --- the clients ---------------------------------------------------------------------------


def _request(client: Any, scenario: str, png: bytes, image_id: str) -> Any:
    if scenario == "upload":
        return client.post("/v1/images", content=png, headers={"Content-Type": "image/jpeg"})
    if scenario == "inline":
        body = {"image_base64": base64.b64encode(png).decode(), "phrases": PHRASES[:1]}
        return client.post("/v1/segment", json=body)
    return client.post("/v1/segment", json={"image_id": image_id, "phrases": PHRASES})


def measure(scenario: str, clients: int, png: bytes, package_root: Path | None) -> dict[str, Any]:
    """One fresh server, one warm-up request, then ``clients`` at once; figures in MiB."""
    import httpx

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop(_PACKAGE_ROOT_ENV, None)
    if package_root is not None:
        env[_PACKAGE_ROOT_ENV] = str(package_root.resolve())
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    limits = {"max_upload_bytes": 64 * MIB}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.bench.service", "--serve", json.dumps(limits)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=600) as warm:
            uploaded = warm.post("/v1/images", content=png)
            uploaded.raise_for_status()
            image_id = uploaded.json()["image_id"]
            _request(warm, scenario, png, image_id).raise_for_status()
        before = _status(proc.pid, "VmRSS")
        try:
            Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
            reset = True
        except OSError:
            reset = False
        barrier = threading.Barrier(clients)
        statuses: list[int] = []
        refused = [0]
        lock = threading.Lock()

        def client() -> None:
            with httpx.Client(base_url=base, timeout=600) as http:
                barrier.wait()
                while True:
                    response = _request(http, scenario, png, image_id)
                    if response.status_code != 503:
                        break
                    with lock:
                        refused[0] += 1
                    time.sleep(float(response.headers.get("retry-after", "1")))
                with lock:
                    statuses.append(response.status_code)

        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        peak = _status(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "scenario": scenario,
        "clients": clients,
        "peak_mb": (peak - before) / MIB if reset else peak / MIB,
        "peak_reset": reset,
        "ok": sum(s == 200 for s in statuses),
        "refused_503": refused[0],
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench service", description=__doc__)
    parser.add_argument("--clients", default="5,50", help="client counts, comma-separated")
    parser.add_argument("--megapixels", type=float, default=12.0, help="pixels of the photo")
    parser.add_argument("--noise", type=float, default=10.0, help="grain; sets the JPEG size")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--package-root", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="one JSON line per measurement")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(json.loads(args.serve))
        return
    counts = [int(c) for c in args.clients.split(",")]
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s) {sorted(unknown)}; choose from {SCENARIOS}")
    png, (height, width) = _photo(args.megapixels, args.noise)
    print(
        f"image: {len(png) / MIB:.1f} MiB JPEG, {width}x{height} "
        f"({height * width * 3 / MIB:.1f} MiB decoded); "
        f"server: {args.package_root or ROOT}"
    )
    rows: list[dict[str, Any]] = []
    for scenario in scenarios:
        for count in counts:
            row = measure(scenario, count, png, args.package_root)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    print(f"{'scenario':<9} {'clients':>7} {'peak MiB':>9} {'503s':>5} {'ok':>4} {'s':>6}")
    for row in rows:
        print(
            f"{row['scenario']:<9} {row['clients']:>7} {row['peak_mb']:>9.1f} "
            f"{row['refused_503']:>5} {row['ok']:>4} {row['seconds']:>6.1f}"
        )
    if len(counts) >= 2:
        low, high = min(counts), max(counts)
        for scenario in scenarios:
            figures = {r["clients"]: r["peak_mb"] for r in rows if r["scenario"] == scenario}
            ratio = figures[high] / max(figures[low], 1.0)
            print(f"{scenario}: peak at {high} clients / at {low} clients = {ratio:.2f}x")


if __name__ == "__main__":
    main()
