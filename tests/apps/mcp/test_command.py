"""``sam3-agent mcp`` refuses a bad flag in one line, exit 2, before any model loads."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from sam3_agent.apps.cli.flags.servers import parse_bind
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.errors import UserError

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: BackendSpec, **_: object) -> None:
        raise AssertionError("a refused flag must be answered before the models are planned")

    monkeypatch.setattr(BackendSpec, "plan", refused)
    monkeypatch.delenv("SAM3_AGENT_MCP_TOKEN", raising=False)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--http", "0.0.0.0:8765"], "refusing to serve MCP on 0.0.0.0 without a token"),
        (["--http", "nope"], "--http must be HOST:PORT"),
        (["--http", "127.0.0.1:0"], "--http must be HOST:PORT"),
        (["--http", "127.0.0.1:70000"], "--http must be HOST:PORT"),
        (["--http", ":8765"], "--http must be HOST:PORT"),
        (["--max-concurrent", "0"], "--max-concurrent must be >= 1, got 0"),
        (["--max-download-mb", "0"], "--max-download-mb must be >= 1"),
    ],
)
def test_a_bad_flag_is_one_line_before_models_load(args: list[str], said: str) -> None:
    done = runner.invoke(app, ["mcp", *args])
    assert done.exit_code == 2, done.output
    assert said in done.stderr and "Traceback" not in done.output
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_port_in_use_and_an_out_that_is_a_file_are_refused(
    taken_port: int, tmp_path: Path
) -> None:
    done = runner.invoke(app, ["mcp", "--http", f"127.0.0.1:{taken_port}"])
    assert done.exit_code == 2 and f"port {taken_port} on 127.0.0.1 is in use" in done.stderr
    (tmp_path / "file").write_text("x")
    done = runner.invoke(app, ["mcp", "--out", str(tmp_path / "file")])
    assert done.exit_code == 2 and "is a file, not a directory" in done.stderr


@given(st.text())
def test_any_http_value_is_a_bind_or_one_line(text: str) -> None:
    try:
        host, port = parse_bind(text)
    except UserError as e:
        assert "\n" not in str(e) and len(str(e)) < 300
    else:
        assert host and 1 <= port <= 65535
