"""``sam3-agent demo``'s video tab: its flags checked before any model loads, SAM 3's video
model not loaded at start (only by the first video request), ``--no-video`` without the tab."""

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
    raise AssertionError("a model was built that should not have been")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["demo", *args])


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []

    def segmenter(self: BackendSpec) -> FakeSegmenter:
        built.append("sam3")
        return FakeSegmenter()

    def chat_model(self: BackendSpec) -> ScriptedChatModel:
        built.append("llm")
        return ScriptedChatModel()

    monkeypatch.setattr(BackendSpec, "build_segmenter", segmenter)
    monkeypatch.setattr(BackendSpec, "build_chat_model", chat_model)
    # Not at start: SAM 3's video model loads on the first video request only.
    monkeypatch.setattr(BackendSpec, "build_video_segmenter", never, raising=False)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    monkeypatch.delenv(demo_cli.DEMO_TOKEN_ENV, raising=False)
    return built


def test_help_lists_the_video_flags():
    result = invoke("--help")
    assert result.exit_code == 0
    for flag in ("--video", "--no-video", "--max-video-mb", "--max-video-frames"):
        assert flag in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-video-mb", "0"], "--max-video-mb must be a size > 0, got 0.0"),
        (["--max-video-mb", "nan"], "--max-video-mb must be a size > 0"),
        (["--max-video-frames", "0"], "--max-video-frames must be >= 1, got 0"),
    ],
)
def test_bad_video_flags_fail_in_one_line_before_any_model_loads(
    models: list[str], args: list[str], message: str
):
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert models == []


@pytest.mark.parametrize(("flag", "tab"), [(None, True), ("--no-video", False)])
def test_the_video_tab_is_served_without_loading_the_video_model(
    models: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flag: str | None, tab: bool
):
    pytest.importorskip("gradio")
    from starlette.testclient import TestClient

    from sam3_agent.apps.demo import server

    served: dict[str, Any] = {}
    monkeypatch.setattr(server, "serve", lambda app, **kwargs: served.update(app=app))
    args = ["--out", str(tmp_path / "runs"), "--max-video-frames", "50"]
    result = invoke(*args, *([flag] if flag else []))
    assert result.exit_code == 0, result.output
    assert models == ["sam3", "llm"]
    with TestClient(served["app"]) as http:
        config = http.get("/config").json()
    names = {d.get("api_name") for d in config["dependencies"]}
    assert {"run", "stop"} <= names
    assert ({"run_video", "stop_video"} <= names) is tab
