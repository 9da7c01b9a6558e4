"""A taken port is one line and exit 2, for ``serve-sam3`` and ``demo`` alike: before any
model library is imported, and also when the port was taken while the models loaded (the
servers listen on sockets bound by the package, not by uvicorn). Only 127.0.0.1 is used."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.apps.service import server
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.errors import UserError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


@contextmanager
def listening() -> Iterator[int]:
    """Another server: a socket listening on a free 127.0.0.1 port; yields the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def no_model(self: BackendSpec) -> Any:
    raise AssertionError("a model was built although the port is taken")


def test_a_port_in_use_is_refused_and_a_free_one_passes() -> None:
    with listening() as port:
        with pytest.raises(UserError, match=f"^port {port} on 127.0.0.1 is in use$"):
            server.check_port_free("127.0.0.1", port)
        with pytest.raises(UserError, match="in use"):
            server.bind_listeners("127.0.0.1", port)
    server.check_port_free("127.0.0.1", free_port())


@pytest.mark.parametrize("command", ["serve-sam3", "demo"])
def test_the_commands_refuse_a_port_in_use_before_any_model(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BackendSpec, "build_segmenter", no_model)
    monkeypatch.setattr(BackendSpec, "build_chat_model", no_model)
    monkeypatch.setattr(BackendSpec, "plan", no_model)
    with listening() as port:
        result = runner.invoke(app, [command, "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: port {port} on 127.0.0.1 is in use\n"


def test_serve_sam3_refuses_the_port_before_importing_a_model_library() -> None:
    script = (
        "import sys\n"
        "from sam3_agent.apps.cli.main import app\n"
        "try:\n"
        "    app(['serve-sam3', '--port', sys.argv[1]])\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'numpy', 'uvicorn') if m in sys.modules]\n"
        "print(code, heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with listening() as port:
        done = subprocess.run(
            [sys.executable, "-c", script, str(port)],
            capture_output=True, text=True, env=env, cwd=ROOT, check=False,
        )  # fmt: skip
    assert done.stdout.strip() == "2 []", done.stderr
    assert done.stderr.strip() == f"error: port {port} on 127.0.0.1 is in use"


def test_serve_sam3_says_so_when_the_port_is_taken_while_the_model_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    others: list[socket.socket] = []

    def load_while_another_server_starts(self: BackendSpec) -> FakeSegmenter:
        other = socket.socket()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", port))
        other.listen()
        others.append(other)
        return FakeSegmenter()

    monkeypatch.setattr(BackendSpec, "build_segmenter", load_while_another_server_starts)
    try:
        result = runner.invoke(app, ["serve-sam3", "--port", str(port)])
    finally:
        for other in others:
            other.close()
    assert others, result.output  # the port was free when checked
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == f"error: port {port} on 127.0.0.1 is in use"
    assert "Traceback" not in result.output


def test_demo_says_so_when_the_port_is_taken_while_the_models_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    others: list[socket.socket] = []

    def load_while_another_server_starts(self: BackendSpec) -> FakeSegmenter:
        other = socket.socket()
        other.bind(("127.0.0.1", port))
        other.listen()
        others.append(other)
        return FakeSegmenter()

    monkeypatch.setattr(BackendSpec, "build_segmenter", load_while_another_server_starts)
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: ScriptedChatModel())
    monkeypatch.setattr(
        memory, "read_memory", lambda device: memory.MemoryReading("cpu", 1 << 50, 1 << 50)
    )
    args = ["demo", "--port", str(port), "--out", str(tmp_path / "runs")]
    args += ["--sam3-url", "http://127.0.0.1:9", "--llm-url", "http://127.0.0.1:9/v1"]
    try:
        result = runner.invoke(app, [*args, "--llm-model", "m"])
    finally:
        for other in others:
            other.close()
    assert others, result.output
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == f"error: port {port} on 127.0.0.1 is in use"


@pytest.mark.slow
def test_serve_sam3_serves_on_its_own_sockets_and_stops_cleanly_on_ctrl_c(
    tiny_sam3_dir: Path,
) -> None:
    port = free_port()
    script = "import sys; from sam3_agent.apps.cli.main import app; app(sys.argv[1:])"
    args = ["serve-sam3", "--sam3", str(tiny_sam3_dir), "--device", "cpu", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        health = None
        for _ in range(1200):  # the tiny model loads in seconds; a busy machine may be slow
            if process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    health = json.load(r)
                break
            except OSError:
                time.sleep(0.1)
        assert health == {"status": "ok"}, process.communicate()[1] if process.poll() else ""
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
