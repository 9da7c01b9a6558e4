"""The CLI against an OpenAI-compatible server nobody here wrote: ``transformers serve``.

The server hosts the tiny random Qwen2.5-VL of ``tiny_qwen.py`` on a free 127.0.0.1 port;
``sam3-agent run`` talks to it over HTTP with a tiny SAM 3 in process. Random weights
answer gibberish, so the test checks what a real server exercises and our own test server
cannot: the request (images as data URLs) is accepted, usage is read from the reply, each
gibberish reply becomes a corrective message, and the run ends ``failed`` with exit code 3
and every output written.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The `sam3-agent` application, run as the console script runs it, from this checkout.
CLI = [
    sys.executable,
    "-c",
    "from sam3_agent.apps.cli.main import app; app(prog_name='sam3-agent')",
]
STARTUP_TIMEOUT_S = 180.0
LOCAL = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@dataclass(frozen=True)
class Server:
    url: str
    model: str
    log: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **LOCAL, **extra}


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def bounded_replies() -> list[str]:
    """The flags that bound each reply; checked before a server is started for nothing."""
    if not _has_flag("--max-tokens"):
        # Without it every request asks for 4,096 tokens: minutes at ~70 tokens/s.
        pytest.skip("run --max-tokens is needed to bound the tiny model's replies")
    return ["--max-tokens", "24"]


@pytest.fixture(scope="module")
def server(
    bounded_replies: list[str], tiny_qwen_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """``transformers serve`` hosting the tiny Qwen2.5-VL, ready to answer, stopped after."""
    pytest.importorskip("fastapi", reason="transformers serve needs transformers[serving]")
    log = tmp_path_factory.mktemp("serve") / "server.log"
    port = _free_port()
    command = [
        sys.executable, "-m", "transformers.cli.transformers", "serve", str(tiny_qwen_dir),
        "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "info",
    ]  # fmt: skip
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=_offline_env(), cwd=log.parent
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(process, base, log)
        yield Server(url=f"{base}/v1", model=str(tiny_qwen_dir), log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_until_ready(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    """Poll ``/health`` and ``/v1/models`` until the forced model is listed as loaded."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited with {process.returncode}:\n{_tail(log)}")
            try:
                if client.get(f"{base}/health").status_code == 200:
                    models = client.get(f"{base}/v1/models").json().get("data", [])
                    if models:
                        return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.2)  # the polling interval, not a wait for a guessed duration
    pytest.fail(f"transformers serve not ready after {STARTUP_TIMEOUT_S:.0f} s:\n{_tail(log)}")


def _has_flag(flag: str) -> bool:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": _pythonpath()}
    shown = subprocess.run(
        [*CLI, "run", "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    return flag in shown.stdout


def _pythonpath() -> str:
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


def test_run_against_transformers_serve(
    server: Server,
    bounded_replies: list[str],
    tiny_sam3_dir: Path,
    image: np.ndarray,
    tmp_path: Path,
) -> None:
    photo = tmp_path / "photo.jpg"
    Image.fromarray(image).save(photo)
    out = tmp_path / "out"
    command = [
        *CLI, "run", str(photo), "the cat",
        "--out", str(out), "--json",
        "--sam3", str(tiny_sam3_dir), "--device", "cpu",
        "--llm-url", server.url, "--llm-model", server.model, "--llm-timeout", "120",
        *bounded_replies, "--max-rounds", "2", "--max-corrections", "1",
    ]  # fmt: skip
    env = _offline_env(PYTHONPATH=_pythonpath())
    env.pop("OPENAI_BASE_URL", None)
    env.pop("OPENAI_API_KEY", None)
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)

    # The session spent its budget on gibberish: failed, exit 3, one clean summary line.
    assert run.returncode == 3, f"{run.stderr}\nserver log:\n{_tail(server.log)}"
    assert "Traceback" not in run.stderr
    document = json.loads(run.stdout)
    assert document == json.loads((out / "result.json").read_text())
    assert document["status"] == "failed" and document["failure"]
    assert document["model"] == server.model
    assert document["rounds"] == 2

    # Usage came from the server's replies: a prompt of thousands of byte-level tokens with
    # an image, and completions bounded by --max-tokens.
    main = document["usage"]["main"]
    assert main["calls"] == 2
    assert main["prompt_tokens"] > 1000
    assert 0 < main["completion_tokens"] <= 2 * int(bounded_replies[-1])

    # Every gibberish reply became a corrective message, and the next call carried it.
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    main_records = [r for r in records if r.get("kind") == "main"]
    assert len(main_records) == 2
    for record in main_records:
        assert record["reply"]  # the server's text, whatever it says
        assert record["tool_call"] is None
        assert record["outcome"]["kind"] == "correction" and record["outcome"]["text"]
    second_context = json.dumps(main_records[1]["context"])
    assert json.dumps(main_records[0]["outcome"]["text"])[1:-1] in second_context

    # The image went over the wire as a data URL and the server accepted both requests.
    served = server.log.read_text(errors="replace")
    assert served.count('"POST /v1/chat/completions HTTP/1.1" 200') >= 2
    assert (out / "overlay.png").is_file() and (out / "system_prompt.txt").is_file()
    images = [p.name for p in (out / "images").iterdir()]
    assert images and all((out / "images" / name).stat().st_size > 0 for name in images)
