"""One request through the library (``runs.single``, ``runs.rundirs``), as ``run`` and
``track`` call it: what it tells its caller, what it refuses, what Ctrl+C leaves."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from sam3_agent.agent.events import RoundEvent
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.rundirs import Interrupted, Output
from sam3_agent.runs.single import segment_request
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import UserError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

SPEC = BackendSpec(
    sam3_url="http://127.0.0.1:9", llm_url=["http://127.0.0.1:9/v1"], llm_model="scripted"
)


class Told:
    """A :class:`~sam3_agent.runs.single.Progress` that keeps what it is told, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def note(self, line: str) -> None:
        self.said.append(f"note {line}")

    def status(self, line: str) -> None:
        self.said.append(f"status {line}")

    def round(self, event: RoundEvent) -> None:
        self.said.append(f"round {event.round} {event.tool}")


@pytest.fixture
def photo(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    return path


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch, three_cats: Detections) -> list[str]:
    """The models each request builds: a scripted MLLM that picks two cats."""
    made: list[str] = []

    def chat(spec: BackendSpec) -> Any:
        made.append("mllm")
        return ScriptedChatModel(
            replies=[
                tool("segment_phrase", text_prompt="cat"),
                tool("select_masks_and_return", final_answer_masks=[1, 2]),
            ]
        )

    def sam3(spec: BackendSpec) -> Any:
        made.append("sam3")
        return FakeSegmenter({"cat": three_cats})

    monkeypatch.setattr(BackendSpec, "build_chat_model", chat)
    monkeypatch.setattr(BackendSpec, "build_segmenter", sam3)
    return made


def test_a_request_tells_each_step_and_returns_what_it_wrote(
    photo: Path, tmp_path: Path, built: list[str]
) -> None:
    told, out = Told(), tmp_path / "out"
    done = segment_request(SPEC, photo, "two cats", AgentConfig(), Output(out), told)
    assert told.said == [
        "status loading models...",
        "status round 1: asking scripted...",
        "round 1 segment_phrase",
        "status round 2: asking scripted...",
        "round 2 select_masks_and_return",
        "status round 3: asking scripted...",
    ]
    assert done.directory == out and len(done.result.detections) == 2
    assert json.loads((out / "result.json").read_text()) == done.document
    assert built == ["sam3", "mllm"]


def test_an_ended_session_is_finished_again_without_any_model(
    photo: Path, tmp_path: Path, built: list[str]
) -> None:
    out = tmp_path / "out"
    first = segment_request(SPEC, photo, "two cats", AgentConfig(), Output(out), Told())
    built.clear()
    told = Told()
    again = segment_request(SPEC, photo, "two cats", AgentConfig(), Output(resume=out), told)
    assert told.said == [f"note the session in {out} ended after round 2: no model to load"]
    assert built == [] and again.directory == out
    assert again.document["masks"] == first.document["masks"]


@pytest.mark.parametrize(
    ("output", "agent", "said"),
    [
        (lambda tmp: Output(tmp / "a", resume=tmp / "b"), True,
         "`resume` continues the session in its own directory; drop `out`"),
        (lambda tmp: Output(resume=tmp / "b"), False,
         "`resume` continues an agent session; not with `mode='sam3-only'`"),
        (lambda tmp: Output(tmp / "full"), True, "`out` {tmp}/full is not empty; pass "
         "`overwrite` to replace the previous run's files, or choose another directory"),
        (lambda tmp: Output(tmp / "full", overwrite=True), True, "`overwrite` replaces a "
         "previous run's files, but {tmp}/full does not hold a run (no result.json or "
         "trace.jsonl); choose another directory"),
        (lambda tmp: Output(tmp / "afile"), True, "`out` {tmp}/afile is a file, not a directory"),
    ],
)  # fmt: skip
def test_a_refused_output_names_its_settings(
    tmp_path: Path, output: Callable[[Path], Output], agent: bool, said: str
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError) as refused:
        output(tmp_path).check(agent=agent)
    assert str(refused.value) == said.replace("{tmp}", str(tmp_path))


def test_ctrl_c_before_the_session_started_leaves_no_directory_behind(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with pytest.raises(KeyboardInterrupt) as stopped, Output(out).claimed("x"):
        out.mkdir(parents=True)  # as the session does, before it saves anything
        raise KeyboardInterrupt
    assert type(stopped.value) is KeyboardInterrupt
    assert not (tmp_path / "new").exists()


def test_ctrl_c_after_the_session_started_says_how_to_continue(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(Interrupted) as stopped, Output(out).claimed("x"):
        out.mkdir()
        (out / "session.json").write_text("{}")
        raise KeyboardInterrupt
    assert str(stopped.value) == (
        f"the finished rounds are kept in {out}; continue with the same command and `resume` {out}"
    )
    assert (out / "session.json").is_file()
