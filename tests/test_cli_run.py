"""``sam3-agent run`` through typer's CliRunner, with the test doubles as backends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeSegmenter, ScriptedChatModel, tool
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.cli.main import app
from sam3_agent.cli.options import BackendOptions
from sam3_agent.detections import Detections
from sam3_agent.errors import ChatModelError

runner = CliRunner()


@pytest.fixture
def photo(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    return path


@pytest.fixture
def backends(monkeypatch: pytest.MonkeyPatch, three_cats: Detections) -> dict[str, object]:
    made: dict[str, object] = {
        "segmenter": FakeSegmenter({"cat": three_cats}),
        "chat": ScriptedChatModel(),
    }

    def build_segmenter(self: BackendOptions) -> object:
        made["options"] = self
        return made["segmenter"]

    monkeypatch.setattr(BackendOptions, "build_segmenter", build_segmenter)
    monkeypatch.setattr(BackendOptions, "build_chat_model", lambda self: made["chat"])
    return made


def test_run_writes_files_and_prints_json(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[1, 2]),
    ]
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["run", str(photo), "two cats", "--out", str(out), "--json", "--max-rounds", "4"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "masks" and len(document["masks"]) == 2
    assert document["image"]["path"] == str(photo)
    assert json.loads((out / "result.json").read_text()) == document
    assert (out / "overlay.png").is_file()
    assert len((out / "trace.jsonl").read_text().splitlines()) == 2
    assert "round 1: segment_phrase" in result.stderr


def test_backend_flags_reach_the_factories(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [tool("report_no_mask")]
    result = runner.invoke(
        app,
        [
            "run", str(photo), "x", "--out", str(tmp_path / "o"),
            "--sam3-url", "http://127.0.0.1:8100", "--llm-url", "http://127.0.0.1:9/v1",
            "--llm-model", "qwen", "--tool-protocol", "native",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    options = backends["options"]
    assert isinstance(options, BackendOptions)
    assert options.sam3_url == "http://127.0.0.1:8100"
    assert (options.llm_url, options.llm_model, options.tool_protocol) == (
        "http://127.0.0.1:9/v1",
        "qwen",
        "native",
    )


def test_failed_session_exits_3_and_keeps_files(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = ["no tool"] * 5
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(photo), "x", "--out", str(out), "--max-rounds", "2"])
    assert result.exit_code == 3
    assert "failed" in result.stderr
    assert json.loads((out / "result.json").read_text())["status"] == "failed"


def test_missing_image_is_one_clean_line(tmp_path: Path, backends: dict[str, object]) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "nope.jpg"), "cat"])
    assert result.exit_code == 2
    assert "error: image not found" in result.stderr
    assert "Traceback" not in result.output


def test_corrupt_image_is_one_clean_line(tmp_path: Path, backends: dict[str, object]) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    result = runner.invoke(app, ["run", str(bad), "cat"])
    assert result.exit_code == 2
    assert "cannot read image" in result.stderr


def test_backend_failure_is_one_clean_line(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    class Down(ScriptedChatModel):
        async def complete(self, messages, *, tools=None):  # type: ignore[no-untyped-def]
            raise ChatModelError("endpoint http://127.0.0.1:9/v1 unreachable after 5 tries")

    backends["chat"] = Down()
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(photo), "x", "--out", str(out)])
    assert result.exit_code == 1
    assert "ChatModelError: endpoint" in result.stderr
    assert "Traceback" not in result.output
    assert json.loads((out / "result.json").read_text())["status"] == "failed"


def test_bad_option_values(photo: Path, backends: dict[str, object]) -> None:
    result = runner.invoke(app, ["run", str(photo), "x", "--max-rounds", "0"])
    assert result.exit_code == 2 and "--max-rounds must be >= 1" in result.stderr
    result = runner.invoke(app, ["run", str(photo), "x", "--tool-protocol", "xml"])
    assert result.exit_code == 2


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("sam3-agent ")


def test_empty_query_fails_before_any_model_loads(
    photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_models(self: BackendOptions) -> object:
        raise AssertionError("models must not be built for a bad query")

    monkeypatch.setattr(BackendOptions, "build_segmenter", no_models)
    monkeypatch.setattr(BackendOptions, "build_chat_model", no_models)
    result = runner.invoke(app, ["run", str(photo), "   "])
    assert result.exit_code == 2 and "query is empty" in result.stderr
