"""``sam3-agent demo``: flags checked before any model loads, then the app served once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.flags import servers as demo_cli
from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from tests.support.fakes import FakeSegmenter, ScriptedChatModel

PLENTY = memory.MemoryReading("cpu", 1 << 50, 1 << 50)


def never(self: BackendSpec) -> Any:
    raise AssertionError("a model was built before the flags were checked")


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BackendSpec, "build_segmenter", never)
    monkeypatch.setattr(BackendSpec, "build_chat_model", never)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    monkeypatch.delenv(demo_cli.DEMO_TOKEN_ENV, raising=False)


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["demo", *args], env=env)


def test_help_lists_the_demo_and_backend_flags():
    result = invoke("--help")
    assert result.exit_code == 0
    for flag in ("--host", "--port", "--token", "--serve-sam3-api", "--llm-url", "--sam3"):
        assert flag in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to serve the demo on 0.0.0.0 without a token"),
        (["--port", "0"], "--port must be in 1..65535"),
        (["--concurrency", "0"], "--concurrency must be >= 1"),
        (["--max-rounds", "0"], "--max-rounds must be >= 1"),
    ],
)
def test_bad_flags_fail_in_one_line_before_any_model_loads(
    no_models: None, args: list[str], message: str
):
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_without_gradio_the_command_says_how_to_install_it(
    no_models: None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(demo_cli.importlib.util, "find_spec", lambda name: None)
    result = invoke()
    assert result.exit_code == 2 and "the demo needs gradio: pip install" in result.output


def test_serves_the_page_and_the_sam3_api_with_the_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    pytest.importorskip("gradio")
    from starlette.testclient import TestClient

    from sam3_agent.apps.demo import server

    built: list[str] = []

    def segmenter(self: BackendSpec) -> FakeSegmenter:
        built.append("sam3")
        return FakeSegmenter()

    def chat_model(self: BackendSpec) -> ScriptedChatModel:
        built.append("llm")
        return ScriptedChatModel()

    served: dict[str, Any] = {}

    def fake_serve(app: Any, *, host: str, port: int, log_level: str) -> None:
        served.update(app=app, host=host, port=port)

    monkeypatch.setattr(BackendSpec, "build_segmenter", segmenter)
    monkeypatch.setattr(BackendSpec, "build_chat_model", chat_model)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    monkeypatch.setattr(server, "serve", fake_serve)
    out = tmp_path / "runs"
    result = invoke(
        "--host", "0.0.0.0", "--port", "8765", "--serve-sam3-api", "--out", str(out),
        env={demo_cli.DEMO_TOKEN_ENV: "from-env"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert built == ["sam3", "llm"]  # each model once for the whole process
    assert (served["host"], served["port"]) == ("0.0.0.0", 8765)
    assert out.is_dir()
    with TestClient(served["app"]) as http:
        assert http.get("/health").json() == {"status": "ok"}
        assert http.post("/v1/images", content=b"x").status_code == 401
        config = http.get("/config")
        assert config.status_code == 401  # the page needs a login first
        login = http.post("/login", data={"username": "me", "password": "from-env"})
        assert login.status_code == 200
        assert http.get("/config").status_code == 200


def test_max_pixels_bounds_the_uploads_of_the_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    pytest.importorskip("gradio")
    import asyncio

    from sam3_agent.apps.demo import server
    from sam3_agent.apps.demo.sessions import DemoRunner
    from tests.support.demo_fixtures import COFFEE

    runners: list[DemoRunner] = []
    real_create_app = server.create_app

    def create_app(runner: DemoRunner, **kwargs: Any) -> Any:
        runners.append(runner)
        return real_create_app(runner, **kwargs)

    monkeypatch.setattr(BackendSpec, "build_segmenter", lambda self: FakeSegmenter())
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: ScriptedChatModel())
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    monkeypatch.setattr(server, "create_app", create_app)
    monkeypatch.setattr(server, "serve", lambda app, **kwargs: None)
    result = invoke("--max-pixels", "100000", "--out", str(tmp_path / "runs"))
    assert result.exit_code == 0, result.output

    (runner,) = runners
    assert runner.max_pixels == 100_000

    async def answer() -> list[Any]:
        return [u async for u in runner.run("tab-1", COFFEE, "the cup")]

    (refused,) = asyncio.run(answer())
    assert refused.state == "error"
    assert refused.message.startswith("image too large: coffee.jpg is 600x400 = 240000 pixels")
