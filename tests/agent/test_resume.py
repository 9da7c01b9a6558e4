"""A session killed at any point resumes to the result an uninterrupted run gives.

In process, a "kill" is an exception nothing catches, raised before a chosen MLLM call or
right after SAM 3 answered; across processes, the real ``run`` command is killed with
SIGKILL and resumed with ``--resume``. Either way no finished call is made twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.agent.checkpoint import JOURNAL_FILE, STATE_FILE
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.session import Session
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.messages import ChatResponse, NativeToolCall
from tests.support.fakes import FakeSegmenter, ScriptedChatModel
from tests.support.resume import QUERY, Killed, KilledAt, comparable, trace_records
from tests.support.resume_driver import SCRIPT, VERDICTS, LoggedChatModel, cats, make_segmenter

ROOT = Path(__file__).parents[2]
# Remote backends by name (the fakes answer; nothing listens there), so no in-process model
# is planned or sized; checks one at a time, so a kill can land between two of them.
FAKE_BACKEND_FLAGS = [
    "--sam3-url", "http://127.0.0.1:9", "--llm-url", "http://127.0.0.1:9/v1",
    "--llm-model", "scripted", "--check-concurrency", "1",
]  # fmt: skip
CHAT_CALLS = len(SCRIPT) + 3  # three masks are checked


def new_chat() -> ScriptedChatModel:
    return ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))


@pytest.fixture
def reference(tmp_path: Path, image: np.ndarray) -> tuple[AgentResult, Path]:
    out = tmp_path / "uninterrupted"
    agent = Sam3Agent(FakeSegmenter({"cat": cats}), new_chat(), AgentConfig())
    result = agent.run(image, QUERY, output_dir=out)
    assert result.status == "masks" and len(result.detections) == 2
    return result, out


def resume_and_compare(
    image: np.ndarray,
    out: Path,
    chat: ScriptedChatModel,
    segmenter: FakeSegmenter,
    reference: tuple[AgentResult, Path],
) -> None:
    resumed = Sam3Agent(segmenter, chat, AgentConfig()).run(
        image, QUERY, output_dir=out, resume=True
    )
    expected, expected_dir = reference
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert trace_records(out) == trace_records(expected_dir)
    # Every scripted answer and SAM 3 result was used once, over both runs together.
    assert chat.replies == [] and len(chat.main_calls) == len(SCRIPT)
    assert len(chat.check_calls) == 3
    assert segmenter.phrases == ["dog", "cat"]


@pytest.mark.parametrize("at", range(1, CHAT_CALLS + 1))
def test_killed_before_any_mllm_call_resumes_to_the_same_result(
    tmp_path: Path, image: np.ndarray, reference: tuple[AgentResult, Path], at: int
) -> None:
    chat, segmenter = new_chat(), FakeSegmenter({"cat": cats})
    out = tmp_path / "run"
    with pytest.raises(Killed):
        Sam3Agent(segmenter, KilledAt(chat, at), AgentConfig()).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]
    resume_and_compare(image, out, chat, segmenter, reference)


def killed_after_sam3_answered(
    image: np.ndarray, out: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ScriptedChatModel, FakeSegmenter]:
    """A session in ``out`` killed in round 2 after SAM 3 answered "cat", before the commit:
    the round's chat answer and SAM 3 result are journaled, not committed."""
    chat, segmenter = new_chat(), FakeSegmenter({"cat": cats})

    async def die(self: Session, detections: object) -> None:
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(Session, "show_masks", die)
        with pytest.raises(Killed):
            Sam3Agent(segmenter, chat, AgentConfig()).run(image, QUERY, output_dir=out)
    return chat, segmenter


def test_killed_after_sam3_answered_does_not_ask_sam3_again(
    tmp_path: Path,
    image: np.ndarray,
    reference: tuple[AgentResult, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "run"
    chat, segmenter = killed_after_sam3_answered(image, out, monkeypatch)
    assert segmenter.phrases == ["dog", "cat"]  # "cat" answered; the round never committed
    assert json.loads((out / STATE_FILE).read_text())["state"]["round"] == 1
    resume_and_compare(image, out, chat, segmenter, reference)


@pytest.mark.parametrize("bad_value", [42, "text", [], {"text": 7}, {"detections": {}}])
def test_a_journal_record_of_the_wrong_shape_is_asked_again_not_a_crash(
    tmp_path: Path,
    image: np.ndarray,
    reference: tuple[AgentResult, Path],
    monkeypatch: pytest.MonkeyPatch,
    bad_value: object,
) -> None:
    # Valid JSON whose value does not validate (a hand edit, a disk fault): treated like a
    # torn line, so the answer or the SAM 3 result is asked for again and the session ends.
    out = tmp_path / "run"
    chat, segmenter = killed_after_sam3_answered(image, out, monkeypatch)
    journal = out / JOURNAL_FILE
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert {r["kind"] for r in records} == {"chat", "segment"}
    journal.write_text("".join(json.dumps({**r, "value": bad_value}) + "\n" for r in records))
    chat.replies.insert(0, SCRIPT[1])  # the round's answer, asked for again
    resumed = Sam3Agent(segmenter, chat, AgentConfig()).run(
        image, QUERY, output_dir=out, resume=True
    )
    expected, _ = reference
    assert resumed.status == expected.status and len(resumed.detections) == 2
    assert segmenter.phrases == ["dog", "cat", "cat"]  # SAM 3 asked again, once


def native(reply: str) -> ChatResponse:
    """``reply`` (a tagged tool call) as a native tool call."""
    call = json.loads(reply.split("<tool>")[1].split("</tool>")[0])
    return ChatResponse(
        "", tool_calls=(NativeToolCall(call["name"], json.dumps(call["parameters"])),)
    )


@pytest.mark.parametrize("at", [3, 5])
def test_native_tool_calls_resume_too(tmp_path: Path, image: np.ndarray, at: int) -> None:
    config = AgentConfig(tool_protocol="native")

    def chat() -> ScriptedChatModel:
        return ScriptedChatModel(replies=[native(r) for r in SCRIPT], verdicts=dict(VERDICTS))

    expected = Sam3Agent(FakeSegmenter({"cat": cats}), chat(), config).run(
        image, QUERY, output_dir=tmp_path / "ref"
    )
    scripted, segmenter, out = chat(), FakeSegmenter({"cat": cats}), tmp_path / "run"
    with pytest.raises(Killed):
        Sam3Agent(segmenter, KilledAt(scripted, at), config).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]
    resumed = Sam3Agent(segmenter, scripted, config).run(image, QUERY, output_dir=out, resume=True)
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert scripted.replies == [] and len(scripted.main_calls) == len(SCRIPT)
    assert trace_records(out) == trace_records(tmp_path / "ref")


# -- across processes: SIGKILL and ``sam3-agent run --resume`` ---------------------------


def committed_round(out: Path) -> int:
    try:
        return int(json.loads((out / STATE_FILE).read_text())["state"]["round"])
    except (OSError, ValueError, KeyError):
        return -1  # not written yet, or being replaced this instant


def journaled_checks(out: Path) -> int:
    path = out / JOURNAL_FILE
    text = path.read_text() if path.is_file() else ""
    return text.count('"kind": "chat"') - 1 if committed_round(out) == 2 else 0


KILL_POINTS: dict[str, Callable[[Path], bool]] = {
    # While round 3's request is in flight.
    "between rounds": lambda out: committed_round(out) >= 2,
    # Round 3 (examine) has its reply and one mask check, two checks to go.
    "mid examine": lambda out: journaled_checks(out) >= 1,
}


@pytest.fixture
def photo(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    return path


def run_cli(log: Path, *args: str, script: str = "paper") -> Any:
    """``sam3-agent run`` in this process, with the driver's logged backends."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAM3_TEST_SCRIPT", script)
        segmenter = make_segmenter(log)
        patch.setattr(BackendSpec, "build_segmenter", lambda self: segmenter)
        patch.setattr(BackendSpec, "build_chat_model", lambda self: LoggedChatModel(log, 0.0))
        return CliRunner().invoke(app, ["run", *args, *FAKE_BACKEND_FLAGS, "--json"])


@pytest.mark.parametrize(
    ("point", "script"),
    [*((point, "paper") for point in KILL_POINTS), ("between rounds", "kept")],
)
def test_sigkilled_run_resumes_to_the_same_result(
    tmp_path: Path, photo: Path, point: str, script: str
) -> None:
    """``kept``: the extended tools' kept set, committed after round 2, carried across."""
    tools = ["--tools", "extended"] if script == "kept" else []
    reference = run_cli(
        tmp_path / "reference.log", str(photo), QUERY, "--out", str(tmp_path / "ref"), *tools,
        script=script,
    )  # fmt: skip
    assert reference.exit_code == 0, reference.output

    out, log = tmp_path / "killed", tmp_path / "killed.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "SAM3_TEST_SCRIPT": script,
    }
    command = [
        sys.executable,
        "-m",
        "tests.support.resume_driver",
        "--log",
        str(log),
        "--delay",
        "0.5",
        "run",
        str(photo),
        QUERY,
    ]
    stderr = tmp_path / "killed.stderr"
    with stderr.open("w") as stderr_file:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [*command, "--out", str(out), *tools, *FAKE_BACKEND_FLAGS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr_file,
        )
    try:
        # A guard against a hung driver, not a measurement: the kill point comes much sooner.
        give_up = time.monotonic() + 120
        while not KILL_POINTS[point](out):
            assert process.poll() is None, stderr.read_text()
            assert time.monotonic() < give_up, "the driver never reached the kill point"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed_after = committed_round(out)
    finally:
        process.kill()
        process.wait()
    assert not (out / "result.json").exists()

    resumed = run_cli(log, str(photo), QUERY, "--resume", str(out), *tools, script=script)
    assert resumed.exit_code == 0, resumed.output
    assert killed_after >= 2
    if script == "kept":  # the answer is the kept set, masks 1 and 3 of the first search
        assert len(json.loads(resumed.stdout)["masks"]) == 2
    assert f"resuming {out} after round {killed_after}" in resumed.stderr
    assert comparable(json.loads(resumed.stdout)) == comparable(json.loads(reference.stdout))
    assert trace_records(out) == trace_records(tmp_path / "ref")
    handed_over = Counter(log.read_text().splitlines())
    assert set(handed_over.values()) == {1}, handed_over  # nothing was asked twice
    assert handed_over == Counter((tmp_path / "reference.log").read_text().splitlines())


def test_resume_with_another_query_is_refused_in_one_line(tmp_path: Path, photo: Path) -> None:
    log, out = tmp_path / "calls.log", tmp_path / "run"
    assert run_cli(log, str(photo), QUERY, "--out", str(out), "--max-rounds", "1").exit_code == 3
    refused = run_cli(log, str(photo), "the dog", "--resume", str(out), "--max-rounds", "1")
    assert refused.exit_code == 2
    assert "the query differs ('the two cats' at start, 'the dog' now)" in refused.stderr
    assert "Traceback" not in refused.output
    other_flags = run_cli(log, str(photo), QUERY, "--resume", str(out), "--max-rounds", "2")
    assert other_flags.exit_code == 2
    assert "setting max_rounds differs (1 at start, 2 now)" in other_flags.stderr


def test_resume_refuses_another_output_directory(tmp_path: Path, photo: Path) -> None:
    args = [str(photo), QUERY, "--resume", str(tmp_path), "--out", str(tmp_path / "elsewhere")]
    refused = run_cli(tmp_path / "calls.log", *args)
    assert refused.exit_code == 2
    assert "drop --out" in refused.stderr
