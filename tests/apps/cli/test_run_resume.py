"""``run --resume`` refuses what its run directory can refuse before any model is built, and a
session with nothing left to ask is finished without any model.

The stand-in backends describe themselves as the real ones built from the same flags would
(``BackendSpec.describe()``; ``tests/backends/test_identity.py`` checks that the two agree),
and every build is recorded: a refused resume and a finished session must build nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.agent.checkpoint import STATE_FILE
from sam3_agent.agent.checkpoint.store import DirectoryLock
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec, ModelPlan
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool
from tests.support.resume import QUERY, CtrlCAt, Killed, KilledAt, comparable, trace_records
from tests.support.resume_driver import SCRIPT, VERDICTS, cats

FLAGS = [
    "--sam3-url", "http://127.0.0.1:9", "--llm-url", "http://127.0.0.1:9/v1",
    "--llm-model", "scripted", "--check-concurrency", "1",
]  # fmt: skip


class Described:
    """A stand-in backend that describes itself as ``description`` says."""

    def __init__(self, inner: Any, description: dict[str, Any]) -> None:
        self.inner, self.description = inner, description

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)

    def describe(self) -> dict[str, Any]:
        return self.description


@dataclass
class Run:
    """One ``run`` invocation: its result and what it built."""

    exit_code: int
    stdout: str
    stderr: str
    built: list[str] = field(default_factory=list)
    planned: int = 0


def run(
    *args: str, kill_at: int | None = None, ctrl_c_at: int | None = None,
    script: Sequence[str] = SCRIPT,
) -> Run:  # fmt: skip
    """``sam3-agent run ARGS --json`` with stand-in backends answering ``script``;
    ``kill_at``: the MLLM call (1-based) at which the process "dies" (:class:`Killed`
    escapes); ``ctrl_c_at``: the one during which the user presses Ctrl+C (:class:`CtrlCAt`)."""
    record = Run(0, "", "")

    def build_chat(spec: BackendSpec) -> Described:
        record.built.append("mllm")
        chat: Any = ScriptedChatModel(replies=list(script), verdicts=dict(VERDICTS))
        if kill_at is not None:
            chat = KilledAt(chat, kill_at)
        if ctrl_c_at is not None:
            chat = CtrlCAt(chat, ctrl_c_at)
        return Described(chat, spec.describe()["mllm"])

    def build_sam3(spec: BackendSpec) -> Described:
        record.built.append("sam3")
        return Described(FakeSegmenter({"cat": cats}), spec.describe()["sam3"])

    def plan(spec: BackendSpec, **kwargs: Any) -> ModelPlan:
        record.planned += 1  # no memory to size here: the stand-ins take none
        return ModelPlan(spec)

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_BASE_URL", raising=False)
        patch.setattr(BackendSpec, "build_chat_model", build_chat)
        patch.setattr(BackendSpec, "build_segmenter", build_sam3)
        patch.setattr(BackendSpec, "plan", plan)
        result = CliRunner().invoke(app, ["run", *args, "--json"])
    record.exit_code, record.stdout, record.stderr = result.exit_code, result.stdout, result.stderr
    return record


@pytest.fixture
def photo(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    return path


@pytest.fixture
def killed(tmp_path: Path, photo: Path) -> Path:
    """A session killed before its third MLLM call: two rounds committed."""
    out = tmp_path / "killed"
    with pytest.raises(Killed):
        run(str(photo), QUERY, "--out", str(out), *FLAGS, kill_at=3)
    assert json.loads((out / STATE_FILE).read_text())["state"]["round"] == 2
    return out


def resume(photo: Path, out: Path, *flags: str) -> Run:
    return run(str(photo), QUERY, "--resume", str(out), *flags)


def with_flag(flags: Sequence[str], name: str, value: str) -> list[str]:
    changed = list(flags)
    if name in changed:
        changed[changed.index(name) + 1] = value
    else:
        changed += [name, value]
    return changed


def refused(result: Run, message: str) -> None:
    assert result.built == [], "a refused resume must build no model"
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("name", ["system_prompt.txt", "checker_prompt.txt"])
def test_an_edited_prompt_is_refused_before_any_model(photo: Path, killed: Path, name: str) -> None:
    (killed / name).write_text("tampered")
    refused(resume(photo, killed, *FLAGS), f"{name} changed since the session started")


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--llm-model", "other-vlm", "--llm-model was 'scripted', now 'other-vlm'"),
        ("--temperature", "0.7", "--temperature was 0.0, now 0.7"),
        ("--max-tokens", "64", "--max-tokens was 4096, now 64"),
        ("--seed", "3", "--seed was not given, now 3"),
        ("--llm-extra", '{"top_k": 2}', '--llm-extra was not given, now {"top_k": 2}'),
        (
            "--sam3-url",
            "http://127.0.0.1:10",
            "--sam3-url was 'http://127.0.0.1:9', now 'http://127.0.0.1:10'",
        ),
    ],
)
def test_other_models_or_settings_are_refused_before_any_model(
    photo: Path, killed: Path, flag: str, value: str, message: str
) -> None:
    result = resume(photo, killed, *with_flag(FLAGS, flag, value))
    refused(result, message)
    assert result.planned == 0  # the flags alone said it


def test_an_in_process_sam3_with_another_dtype_is_refused_before_any_model(
    tmp_path: Path, photo: Path
) -> None:
    out = tmp_path / "killed"
    in_process = [*FLAGS[2:], "--sam3", "facebook/sam3", "--dtype", "bfloat16"]
    with pytest.raises(Killed):
        run(str(photo), QUERY, "--out", str(out), *in_process, kill_at=3)
    refused(
        resume(photo, out, *with_flag(in_process, "--dtype", "float32")),
        "--dtype was 'bfloat16', now 'float32'",
    )
    refused(
        resume(photo, out, *with_flag(in_process, "--sam3", "/models/sam3-ft")),
        "--sam3 was 'facebook/sam3', now '/models/sam3-ft'",
    )


def test_a_live_session_is_refused_before_any_model_and_resumed_once_free(
    photo: Path, killed: Path
) -> None:
    running = DirectoryLock(killed, resuming=True)  # as another live process would hold it
    try:
        refused(resume(photo, killed, *FLAGS), "is in use by another running session")
    finally:
        running.close()
    result = resume(photo, killed, *FLAGS)
    assert result.exit_code == 0, result.stderr
    assert f"resuming {killed} after round 2" in result.stderr
    assert result.built == ["sam3", "mllm"]


def test_ctrl_c_says_how_to_continue_and_the_out_dir_points_there(
    tmp_path: Path, photo: Path
) -> None:
    out = tmp_path / "run"
    stopped = run(str(photo), QUERY, "--out", str(out), *FLAGS, ctrl_c_at=3)
    assert stopped.exit_code == 130, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"interrupted: the finished rounds are kept in {out}; continue with the same command "
        f"and --resume {out}"
    )
    # The same command again, without --resume: refused, naming the way to continue.
    again = run(str(photo), QUERY, "--out", str(out), *FLAGS)
    assert again.exit_code == 2 and again.built == []
    assert f"holds an interrupted session; continue it with --resume {out}" in again.stderr
    assert "--overwrite to start over" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    # As the line says (--out stays); whichever round comes next ends the session.
    end = [tool("report_no_mask")] * 2
    resumed = run(str(photo), QUERY, "--out", str(out), "--resume", str(out), *FLAGS, script=end)
    assert resumed.exit_code == 0, resumed.stderr
    assert f"resuming {out} after round 2" in resumed.stderr


def test_a_finished_session_is_written_again_without_any_model(tmp_path: Path, photo: Path) -> None:
    reference = run(str(photo), QUERY, "--out", str(tmp_path / "ref"), *FLAGS)
    assert reference.exit_code == 0, reference.stderr
    out = tmp_path / "run"
    assert run(str(photo), QUERY, "--out", str(out), *FLAGS).exit_code == 0
    # As if killed after the last commit, before its outputs were written.
    (out / "result.json").unlink()
    (out / "overlay.png").unlink()

    again = resume(photo, out, *FLAGS)
    assert again.exit_code == 0, again.stderr
    assert again.built == [] and again.planned == 0
    assert f"the session in {out} ended after round {len(SCRIPT)}" in again.stderr
    assert comparable(json.loads(again.stdout)) == comparable(json.loads(reference.stdout))
    written = json.loads((out / "result.json").read_text())
    assert comparable(written) == comparable(json.loads(reference.stdout))
    assert (out / "overlay.png").read_bytes() == (tmp_path / "ref" / "overlay.png").read_bytes()
    assert trace_records(out) == trace_records(tmp_path / "ref")


def test_resuming_a_finished_session_keeps_its_total_time(tmp_path: Path, photo: Path) -> None:
    out = tmp_path / "run"
    first = run(str(photo), QUERY, "--out", str(out), *FLAGS)
    assert first.exit_code == 0, first.stderr
    again = resume(photo, out, *FLAGS)
    assert again.exit_code == 0, again.stderr
    total = json.loads(first.stdout)["timings_s"]["total"]
    assert json.loads(again.stdout)["timings_s"]["total"] == total
    assert json.loads((out / "result.json").read_text())["timings_s"]["total"] == total


def test_a_resumed_session_adds_its_time_to_the_rounds_before(photo: Path, killed: Path) -> None:
    before = json.loads((killed / STATE_FILE).read_text())["state"]["timings"]["total"]
    result = resume(photo, killed, *FLAGS)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["timings_s"]["total"] > before > 0


def test_a_session_that_spent_its_rounds_ends_again_without_any_model(
    tmp_path: Path, photo: Path
) -> None:
    out = tmp_path / "run"
    first = run(str(photo), QUERY, "--out", str(out), *FLAGS, "--max-rounds", "1")
    assert first.exit_code == 3, first.stderr
    again = resume(photo, out, *FLAGS, "--max-rounds", "1")
    assert again.exit_code == 3 and again.built == []
    assert "max_rounds (1) reached without an answer" in again.stderr
    assert comparable(json.loads(again.stdout)) == comparable(json.loads(first.stdout))


def test_a_finished_session_with_other_flags_is_still_refused(tmp_path: Path, photo: Path) -> None:
    out = tmp_path / "run"
    assert run(str(photo), QUERY, "--out", str(out), *FLAGS).exit_code == 0
    refused(
        resume(photo, out, *with_flag(FLAGS, "--temperature", "0.5")),
        "--temperature was 0.0, now 0.5",
    )


def test_a_session_of_an_earlier_version_says_what_it_cannot_compare(
    tmp_path: Path, photo: Path
) -> None:
    out = tmp_path / "run"
    assert run(str(photo), QUERY, "--out", str(out), *FLAGS).exit_code == 0
    state = json.loads((out / STATE_FILE).read_text())
    del state["fingerprint"]["backends"]  # as sessions were saved before backends were
    (out / STATE_FILE).write_text(json.dumps(state))
    again = resume(photo, out, *with_flag(FLAGS, "--temperature", "0.5"))
    assert again.exit_code == 0 and again.built == []
    assert "did not record its models and generation settings" in again.stderr
    # What it did record is still compared, before any model.
    refused(
        resume(photo, out, *with_flag(FLAGS, "--llm-model", "other-vlm")),
        "setting model differs ('scripted' at start, 'other-vlm' now)",
    )
