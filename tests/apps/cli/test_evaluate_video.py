"""``sam3-agent eval`` and ``report`` on video datasets: the real video agent, a fake SAM 3
video model and a scripted MLLM (:mod:`tests.support.video_eval_fixtures`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import ResultStore
from tests.support.eval_cli_driver import PLENTY, kill_after_first_commit, use_fake_backends
from tests.support.fakes import ScriptedChatModel, tool
from tests.support.video_datasets import FRAMES, make_mevis, make_revos
from tests.support.video_eval_fixtures import metrics, stored, write_revos_videos

runner = CliRunner()
SUMMARY = (
    "scripted + SAM 3 video agent: ReVOS valid: 3 samples, J 50.0, F 50.0, J&F 50.0 "
    "(J&F by subset: reasoning 0.0, referring 100.0, type-2 100.0), failed 0"
)
BESIDE = (
    "scripted + SAM 3 video agent beside AgentRVOS (published): valid J&F 50.0 vs 66.3 (-16.3), "
    "samples scored 3/3 (100%)"
)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Fresh fakes per command run; ``made`` lists every backend built."""
    return use_fake_backends(video=True, patch=monkeypatch.setattr)


MLLM = ["--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "scripted"]
"""Names the MLLM (the fake answers in its place): no default model is chosen."""


def _eval(*args: str) -> Any:
    return runner.invoke(app, ["eval", "--no-progress", *MLLM, *args])


def test_eval_a_video_dataset_then_report_it(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = make_revos(tmp_path / "data")
    run = tmp_path / "run"
    result = _eval("--dataset", "revos", "--root", str(root), "--out", str(run))
    assert result.exit_code == 0, result.output
    assert "3 evaluated, 0 already stored, 0 failed" in result.stderr
    lines = result.stdout.splitlines()
    assert SUMMARY in lines and BESIDE in lines
    assert f"report: {run / 'report.md'}" in lines
    assert len(fakes["segmenters"]) == 1  # one worker, its models built once
    (method,) = json.loads((run / "metrics.json").read_text())["methods"]
    assert (method["config"]["kind"], method["config"]["dataset"]) == ("video", "revos")
    assert list(method["metrics"]) == ["valid"]

    again = _eval("--dataset", "revos", "--root", str(root), "--out", str(run))
    assert again.exit_code == 0, again.output
    assert "0 evaluated, 3 already stored, 0 failed" in again.stderr

    report = runner.invoke(app, ["report", str(run)])
    assert report.exit_code == 0, report.output
    assert SUMMARY in report.stdout.splitlines() and BESIDE in report.stdout.splitlines()


def test_preset_shards_and_report_merge_to_one_run(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_revos_videos(tmp_path / "data")
    common = ["--preset", "revos-valid", "--root", str(root)]
    assert _eval(*common, "--out", str(tmp_path / "whole")).exit_code == 0
    for i in range(2):
        shard = _eval(*common, "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/2")
        assert shard.exit_code == 0, shard.output
    result = runner.invoke(
        app, ["report", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert metrics(tmp_path / "r") == metrics(tmp_path / "whole")
    assert "samples scored 12/12 (100%)" in result.stdout
    assert "warning" not in result.stderr


def test_limit_warns_beside_the_published_figure(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = make_revos(tmp_path / "data")
    args = ["--dataset", "revos", "--root", str(root), "--out", str(tmp_path / "run")]
    result = _eval(*args, "--limit", "1")
    assert result.exit_code == 0, result.output
    assert "samples scored 1/3 (33%)" in result.stdout
    (warning,) = [x for x in result.stderr.splitlines() if x.startswith("warning:")]
    assert warning.endswith("part of the split: scripted + SAM 3 video agent valid 1/3 (33%)")


def test_a_split_without_public_ground_truth_is_one_line_before_any_model(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = make_mevis(tmp_path / "data")
    out = tmp_path / "run"
    result = _eval("--dataset", "mevis", "--split", "valid", "--root", str(root), "--out", str(out))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot score MeViS valid here: MeViS valid has no public")
    assert "codalab" in line.lower()
    assert not any(fakes.values())  # no model built
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--images", "x"], "--images applies to the refer datasets"),
        (["--all-texts"], "--all-texts applies to reasonseg only"),
        (["--mode", "sam3-only"], "--mode sam3-only applies to image datasets"),
        (["--split", "val"], "ReVOS has no split 'val'; choose one of valid, train"),
    ],
)
def test_image_only_flags_are_refused_for_a_video_dataset(
    tmp_path: Path, fakes: dict[str, Any], flags: list[str], message: str
) -> None:
    root = make_revos(tmp_path / "data")
    result = _eval("--dataset", "revos", "--root", str(root), "--out", str(tmp_path / "o"), *flags)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_video_flags_reach_the_agent_and_the_run_settings(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = make_revos(tmp_path / "data")
    run = tmp_path / "run"
    result = _eval("--dataset", "revos", "--root", str(root), "--out", str(run),
                   "--frames-shown", "3", "--uncertain-looks", "0")  # fmt: skip
    assert result.exit_code == 0, result.output
    (method,) = json.loads((run / "metrics.json").read_text())["methods"]
    assert method["config"]["video"] == {"frames_shown": 3, "check_frames": 4, "uncertain_looks": 0}
    other = _eval("--dataset", "revos", "--root", str(root), "--out", str(run))
    assert other.exit_code == 2 and "frames_shown" in other.stderr  # other settings refused


@pytest.mark.parametrize(
    ("dataset", "flags", "message"),
    [
        ("revos", ["--stride", "2"], "--stride applies to track: eval tracks every frame"),
        ("revos", ["--fps", "24"], "--fps applies to track"),
        ("reasonseg", ["--frames-shown", "3"], "--frames-shown applies to video datasets"),
        ("reasonseg", ["--video-cache-mb", "64"], "--video-cache-mb applies to video datasets"),
    ],
)
def test_video_flags_that_do_not_apply_are_refused_by_name(
    tmp_path: Path, fakes: dict[str, Any], dataset: str, flags: list[str], message: str
) -> None:
    root = make_revos(tmp_path / "data")
    result = _eval("--dataset", dataset, "--root", str(root), "--out", str(tmp_path / "o"), *flags)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert not any(fakes.values())  # no model built


def test_report_refuses_to_mix_image_and_video_runs(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = make_revos(tmp_path / "data")
    assert (
        _eval("--dataset", "revos", "--root", str(root), "--out", str(tmp_path / "v")).exit_code
        == 0
    )
    config = {"dataset": "reasonseg", "split": "val", "mode": "agent"}
    ResultStore.create_or_resume(tmp_path / "i", config, SampleResult.from_json).close()
    result = runner.invoke(
        app, ["report", str(tmp_path / "v"), str(tmp_path / "i"), "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2
    assert "image and video evaluations: report them separately" in result.stderr


def test_progress_in_a_log_file_shows_running_j_and_f(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = make_revos(tmp_path / "data")
    args = ["--dataset", "revos", "--root", str(root), "--out", str(tmp_path / "run")]
    result = runner.invoke(app, ["eval", *MLLM, *args])
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stderr.splitlines() if line.startswith("eval ")]
    assert progress[0].startswith("eval 0/3 (0%)")
    assert progress[-1].startswith("eval 3/3 (100%)")
    assert progress[-1].endswith("J 50.0  F 50.0  J&F 50.0  failed 0")


def test_killed_process_resumes_to_the_uninterrupted_result(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = write_revos_videos(tmp_path / "data", ("r1", "r2"))
    common = ["--dataset", "revos", "--root", str(root), "--concurrency", "1", *MLLM]
    assert _eval(*common, "--out", str(tmp_path / "whole")).exit_code == 0

    run = tmp_path / "killed"
    survived = kill_after_first_commit(common, run, video=True)
    assert 1 <= survived < 6

    result = _eval(*common, "--out", str(run))
    assert result.exit_code == 0, result.output
    assert f"{6 - survived} evaluated, {survived} already stored" in result.stderr
    assert stored(run) == stored(tmp_path / "whole")
    assert metrics(run) == metrics(tmp_path / "whole")


def _select_the_first_track(messages: Any) -> str:
    """An MLLM for the random-weight model: try "square", select track 1 if there is one."""
    if not any(m.role == "assistant" for m in messages):
        return tool("segment_phrase", text_prompt="square")
    if "found no tracks" in messages[-1].joined_text:
        return tool("report_no_mask")
    return tool("select_masks_and_return", final_answer_masks=[1])


def test_eval_on_the_tiny_sam3_video_model(
    tmp_path: Path, tiny_sam3_video_dir: Path, hf_offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real video backend (random weights: the scores mean nothing) through eval: every
    sample tracked over its folder and scored on each annotated frame."""
    monkeypatch.setattr(
        BackendSpec,
        "build_chat_model",
        lambda self: ScriptedChatModel(replies=[_select_the_first_track] * 20),
    )
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    root = make_revos(tmp_path / "data")
    run = tmp_path / "run"
    result = _eval(
        "--dataset", "revos", "--root", str(root), "--out", str(run),
        "--sam3", str(tiny_sam3_video_dir), "--device", "cpu", "--dtype", "float32",
        "--score-threshold", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3 evaluated, 0 already stored, 0 failed" in result.stderr
    rows = stored(run)
    assert [r["frames_scored"] for r in rows] == [FRAMES] * 3
    assert all(0.0 <= r["j"] <= 1.0 and 0.0 <= r["f"] <= 1.0 for r in rows)
    for row in rows:
        done = json.loads((run / row["artifacts"] / "result.json").read_text())
        assert done["video"]["frames_used"] == list(range(FRAMES))
