"""``sam3-agent eval`` and ``report`` end to end: the real agent, fake SAM 3, scripted MLLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sam3_agent.backends.memory import GPU_DEFAULT_MLLM, SMALL_DEFAULT_MLLMS
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import job_dir_name, reading
from tests.support.eval_cli_driver import kill_after_first_commit, make_app, use_fake_backends
from tests.support.eval_fixtures import (
    EXPECTED,
    make_chat_model,
    scripted_reply,
    write_grefcoco,
    write_reasonseg,
    write_refcoco,
)
from tests.support.fakes import ScriptedChatModel

runner = CliRunner()
app = make_app()


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Fresh fakes per command run; ``made`` lists every backend built."""
    return use_fake_backends(patch=monkeypatch.setattr)


def _eval(*args: str) -> Any:
    return runner.invoke(app, ["eval", "--no-progress", *args])


def _overall(run: Path) -> dict[str, Any]:
    doc = json.loads((run / "metrics.json").read_text())
    return dict(doc["methods"][0]["metrics"]["overall"])


def _stored(run: Path) -> list[dict[str, Any]]:
    with reading(run, SampleResult.from_json) as store:
        return [
            {k: v for k, v in r.to_json().items() if k not in ("time_s", "extra")}
            for r in store.results()
        ]


def test_eval_reasonseg_with_the_agent(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    result = _eval("--dataset", "reasonseg", "--root", str(root), "--out", str(run))
    assert result.exit_code == 0, result.output
    overall = _overall(run)
    want = EXPECTED["reasonseg"]
    assert overall["count"] == want["count"]
    assert overall["gIoU"] == pytest.approx(want["gIoU"])
    assert overall["cIoU"] == pytest.approx(want["cIoU"])
    assert overall["failed"] == 1
    doc = json.loads((run / "metrics.json").read_text())
    tags = doc["methods"][0]["metrics"]["splits"]["val"]["tags"]
    assert (tags["short"]["gIoU"], tags["short"]["cIoU"]) == pytest.approx(want["short"])
    assert (tags["long"]["gIoU"], tags["long"]["cIoU"]) == pytest.approx(want["long"])
    # No MLLM named: the machine's default (made explicit before loading) names the run.
    model = doc["methods"][0]["config"]["model"]
    assert model in (GPU_DEFAULT_MLLM, *SMALL_DEFAULT_MLLMS)
    assert doc["methods"][0]["label"] == f"{model} + SAM 3 agent"

    stored = {r["id"]: r for r in _stored(run)}
    assert stored["val/d#0"]["failure"] == "ChatModelError: scripted endpoint failure"
    assert stored["val/b#0"]["rounds"] == 2 and stored["val/b#0"]["calls"] == 2
    assert stored["val/c#0"]["status"] == "no_mask"
    for sid in ("val/a#0", "val/b#0", "val/c#0"):
        artifacts = run / "samples" / job_dir_name(sid)
        assert stored[sid]["artifacts"] == f"samples/{job_dir_name(sid)}"
        for name in ("result.json", "overlay.png", "trace.jsonl"):
            assert (artifacts / name).is_file(), (sid, name)

    md = (run / "report.md").read_text()
    assert f"| {model} + SAM 3 agent | 30.0 | 48.7 |" in md
    assert (run / "iou_hist.png").is_file()
    assert "gIoU 30.0, cIoU 48.7, failed 1" in result.stdout
    assert fakes["segmenters"][0].embed_calls == 4  # one per image


def test_eval_refcoco_sam3_only_needs_no_chat_model(
    tmp_path: Path, fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_chat(self: BackendSpec) -> None:
        raise AssertionError("sam3-only must not build a chat model")

    monkeypatch.setattr(BackendSpec, "build_chat_model", no_chat)
    root = write_refcoco(tmp_path / "refer")
    run = tmp_path / "run"
    result = _eval(
        "--dataset", "refcoco", "--root", str(root), "--out", str(run), "--mode", "sam3-only"
    )
    assert result.exit_code == 0, result.output
    overall = _overall(run)
    assert overall["gIoU"] == pytest.approx(EXPECTED["refcoco"]["gIoU"])
    assert overall["cIoU"] == pytest.approx(EXPECTED["refcoco"]["cIoU"])
    phrases = fakes["segmenters"][0].phrases  # the raw queries, in any order (threads)
    assert sorted(phrases) == ["center person", "man in the middle", "top left cat"]
    assert fakes["segmenters"][0].embed_calls == 2
    assert not (run / "samples").exists()


@pytest.mark.parametrize("mode", ["agent", "sam3-only"])
def test_eval_grefcoco(tmp_path: Path, fakes: dict[str, Any], mode: str) -> None:
    root = write_grefcoco(tmp_path / "grefer")
    run = tmp_path / "run"
    result = _eval("--dataset", "grefcoco", "--root", str(root), "--out", str(run), "--mode", mode)
    assert result.exit_code == 0, result.output
    overall = _overall(run)
    for key in ("gIoU", "cIoU", "N-acc", "T-acc"):
        assert overall[key] == pytest.approx(EXPECTED["grefcoco"][key]), key
    assert "| 50.0 | 50.0 | 50.0 | 50.0 |" in (run / "report.md").read_text()


def test_rerun_skips_finished_and_refuses_other_settings(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    args = ["--dataset", "reasonseg", "--root", str(root), "--out", str(run)]
    assert _eval(*args).exit_code == 0
    first = _stored(run)
    again = _eval(*args, "--concurrency", "2")  # concurrency is not part of the identity
    assert again.exit_code == 0, again.output
    assert "0 evaluated, 4 already stored" in again.stderr
    assert len(fakes["chats"]) == 1  # nothing left to do: no model built for the rerun
    assert _stored(run) == first

    refused = _eval(*args, "--mode", "sam3-only")
    assert refused.exit_code == 2
    assert "different settings" in refused.stderr
    assert "mode was 'agent', now 'sam3-only'" in refused.stderr
    refused = _eval(*args, "--max-rounds", "3")
    assert refused.exit_code == 2
    # The one setting that differs, named alone: not the agent's whole settings twice.
    assert "(agent.max_rounds was 100, now 3);" in refused.stderr
    assert "max_corrections" not in refused.stderr
    refused = _eval(*args, "--context-policy", "fifo")  # the context policy changes predictions
    assert refused.exit_code == 2 and "agent.context_policy was" in refused.stderr
    assert "now 'fifo'" in refused.stderr
    # The rerun had nothing left to do and the refusals came first: SAM 3 loaded once.
    assert len(fakes["segmenters"]) == 1
    chats_built = len(fakes["chats"])
    default = json.loads((run / "metrics.json").read_text())["methods"][0]["config"]["model"]
    refused = _eval(*args, "--llm-model", "other-vlm")
    assert refused.exit_code == 2
    assert f"model was {default!r}, now 'other-vlm'" in refused.stderr
    assert len(fakes["chats"]) == chats_built  # the name came from the flag: nothing loaded
    resumed = _eval(*args, "--llm", f"hf:{default}")  # the same model, named by flag
    assert resumed.exit_code == 0 and "0 evaluated, 4 already stored" in resumed.stderr


def test_limit_and_all_texts(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    common = ["--dataset", "reasonseg", "--root", str(root), "--out", str(run), "--all-texts"]
    assert _eval(*common, "--limit", "2").exit_code == 0
    assert [r["id"] for r in _stored(run)] == ["val/a#0", "val/a#1"]
    assert _overall(run)["gIoU"] == pytest.approx((0.2 + 1.0) / 2)
    assert fakes["segmenters"][0].embed_calls == 1  # both texts of image a share one embedding
    result = _eval(*common)  # a larger limit continues the same run
    assert result.exit_code == 0, result.output
    assert "3 evaluated, 2 already stored" in result.stderr
    assert _overall(run)["count"] == 5


def test_shards_then_report_equal_one_run(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_refcoco(tmp_path / "refer")
    common = ["--dataset", "refcoco", "--root", str(root)]
    assert _eval(*common, "--out", str(tmp_path / "whole")).exit_code == 0
    for i in range(2):
        out = str(tmp_path / f"shard{i}")
        assert _eval(*common, "--out", out, "--shard", f"{i}/2").exit_code == 0
    result = runner.invoke(
        app,
        [
            "report",
            str(tmp_path / "shard0"),
            str(tmp_path / "shard1"),
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert result.exit_code == 0, result.output
    merged = json.loads((tmp_path / "r" / "metrics.json").read_text())["methods"]
    whole = json.loads((tmp_path / "whole" / "metrics.json").read_text())["methods"]
    assert len(merged) == 1
    assert merged[0]["metrics"] == whole[0]["metrics"]
    assert "3 samples, gIoU 46.4, cIoU 53.8" in result.stdout


def test_report_prints_coverage_beside_each_published_figure(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    """6 of 200 in the wild; here 1 of ReasonSeg val's 4: the terminal says so beside the
    paper's figure and warns in one line; the whole split, later, is not warned about."""
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    common = ["--preset", "reasonseg-val", "--root", str(root), "--out", str(run)]
    common += ["--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "Qwen/Qwen2.5-VL-7B-Instruct"]
    assert _eval(*common, "--limit", "1").exit_code == 0
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if "(published)" in x]
    assert line.startswith("Qwen/Qwen2.5-VL-7B-Instruct + SAM 3 agent against SAM 3 Agent, ")
    assert "val gIoU 20.0 vs 62.2 (-42.2), samples scored 1/4 (25%)" in line
    (warning,) = [x for x in result.stderr.splitlines() if x.startswith("warning:")]
    assert "part of the split" in warning and warning.endswith("val 1/4 (25%)")
    assert "warning" not in result.stdout  # stdout stays the results a script reads

    done = _eval(*common)  # the rest of the split: the same command, no --limit
    assert done.exit_code == 0, done.output
    assert "samples scored 4/4 (100%)" in done.stdout
    assert "warning:" not in done.stderr


def test_report_command_errors(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 2 and "--out" in result.stderr
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a run directory" in result.stderr
    assert "Traceback" not in result.output


def test_broken_dataset_is_one_clean_line(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    (root / "val" / "b.json").write_text("{")
    result = _eval("--dataset", "reasonseg", "--root", str(root), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "b.json" in result.stderr and "val/b" in result.stderr
    assert "Traceback" not in result.output
    bad_shard = _eval(
        "--dataset", "reasonseg", "--root", str(root), "--out", str(tmp_path / "o"),
        "--shard", "2/2",
    )  # fmt: skip
    assert bad_shard.exit_code == 2 and "--shard" in bad_shard.stderr


def test_killed_process_resumes_to_the_uninterrupted_result(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    common = ["--dataset", "reasonseg", "--root", str(root), "--all-texts", "--concurrency", "1"]
    assert _eval(*common, "--out", str(tmp_path / "whole")).exit_code == 0

    run = tmp_path / "killed"
    survived = kill_after_first_commit(common, run)
    assert 1 <= survived < 5

    result = _eval(*common, "--out", str(run))
    assert result.exit_code == 0, result.output
    assert f"{5 - survived} evaluated, {survived} already stored" in result.stderr
    assert _stored(run) == _stored(tmp_path / "whole")
    whole_metrics = json.loads((tmp_path / "whole" / "metrics.json").read_text())["methods"]
    resumed_metrics = json.loads((run / "metrics.json").read_text())["methods"]
    assert resumed_metrics[0]["metrics"] == whole_metrics[0]["metrics"]
    with reading(run, SampleResult.from_json) as store:
        assert store.count() == 5


def test_ctrl_c_keeps_committed_samples(
    tmp_path: Path, fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0

    def reply_then_interrupt(messages: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:  # sample a took two calls; Ctrl-C lands during sample b
            raise KeyboardInterrupt
        return scripted_reply(messages)

    monkeypatch.setattr(
        BackendSpec,
        "build_chat_model",
        lambda self: ScriptedChatModel(replies=[reply_then_interrupt] * 20),
    )
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    args = ["--dataset", "reasonseg", "--root", str(root), "--out", str(run), "--concurrency", "1"]
    result = _eval(*args)
    assert result.exit_code == 130
    assert "run the same command to resume" in result.stderr
    assert [r["id"] for r in _stored(run)] == ["val/a#0"]
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: make_chat_model())
    result = _eval(*args)
    assert result.exit_code == 0, result.output
    assert "3 evaluated, 1 already stored" in result.stderr


def test_progress_bar_reports_running_metrics(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    args = ["--dataset", "reasonseg", "--root", str(root), "--out", str(tmp_path / "run")]
    result = runner.invoke(app, ["eval", *args])
    assert result.exit_code == 0, result.output
    assert "4/4" in result.stderr
    assert "gIoU 30.0  cIoU 48.7  failed 1" in result.stderr


def test_progress_in_a_log_file_is_plain_whole_lines(tmp_path: Path, fakes: dict[str, Any]) -> None:
    """Not a terminal (CliRunner's stderr is a buffer): one plain line at the start, one at
    the end, no control characters, and no line wrapped at 80 columns."""
    root = write_reasonseg(tmp_path / "ReasonSeg")
    args = ["--dataset", "reasonseg", "--root", str(root), "--out", str(tmp_path / ("r" * 60))]
    result = runner.invoke(app, ["eval", *args])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    progress = [line for line in lines if line.startswith("eval ")]
    assert progress[0].startswith("eval 0/4 (0%)")
    assert progress[-1].startswith("eval 4/4 (100%)")
    assert progress[-1].endswith("gIoU 30.0  cIoU 48.7  failed 1")
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    (summary,) = [line for line in result.stdout.splitlines() if "samples, gIoU" in line]
    assert summary.endswith("failed 1")
    assert any(
        line.startswith("report: ") and line.endswith("report.md")
        for line in result.stdout.splitlines()
    )


def test_plain_progress_prints_at_most_one_line_per_interval() -> None:
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from sam3_agent.apps.cli.progress import EvalTally, PlainProgress

    now = [0.0]
    buffer = io.StringIO()
    tally = EvalTally(
        SimpleNamespace(
            add=lambda s: None, figures=lambda: [("gIoU", 0.5), ("cIoU", 0.25)], failed=0
        )
    )
    console = Console(file=buffer, width=40)
    progress = PlainProgress(console, "eval", tally, interval_s=10.0, clock=lambda: now[0])
    sample = SimpleNamespace(scored=lambda: None)
    progress.start(total=5, already_done=[])
    lines = []
    for step in (1.0, 2.0, 12.0, 13.0):
        now[0] = step
        progress.update(sample)  # type: ignore[arg-type]
        lines.append(buffer.getvalue().count("\n"))
    assert lines == [1, 1, 2, 2]  # the start line, then one once 10 s have passed
    progress.stop()
    last = buffer.getvalue().splitlines()[-1]
    assert last == "eval 4/5 (80%) elapsed 0:00:13 eta 0:00:03 gIoU 50.0  cIoU 25.0  failed 0"


def test_help_default_concurrency_is_the_runners() -> None:
    from sam3_agent.apps.cli.flags.jobs import DEFAULT_CONCURRENCY
    from sam3_agent.runs.evaluation import handler as runner_module

    assert DEFAULT_CONCURRENCY == runner_module.DEFAULT_CONCURRENCY


def test_preset_sets_dataset_split_mode_and_is_recorded(
    tmp_path: Path, fakes: dict[str, Any]
) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    write_reasonseg(root, split="test")
    common = ["--root", str(root), "--llm-url", "http://127.0.0.1:9/v1"]
    common += ["--llm-model", "Qwen/Qwen2.5-VL-7B-Instruct"]
    for preset in ("reasonseg-val", "reasonseg-test"):
        result = _eval("--preset", preset, *common, "--out", str(tmp_path / preset))
        assert result.exit_code == 0, result.output
        with reading(tmp_path / preset, SampleResult.from_json) as store:
            config = store.config() or {}
        assert (config["preset"], config["dataset"], config["mode"]) == (
            preset,
            "reasonseg",
            "agent",
        )
        assert config["split"] == preset.split("-")[1]
    report = runner.invoke(
        app,
        ["report", str(tmp_path / "reasonseg-val"), str(tmp_path / "reasonseg-test"),
         "--out", str(tmp_path / "report")],
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| SAM 3 Agent, Qwen2.5-VL 7B (published) | 62.2 |" in md
    assert "| Qwen/Qwen2.5-VL-7B-Instruct + SAM 3 agent | Qwen2.5-VL 7B | val | gIoU |" in md


def test_preset_contradictions_and_overrides(tmp_path: Path, fakes: dict[str, Any]) -> None:
    root = write_reasonseg(tmp_path / "ReasonSeg")
    out = ["--root", str(root), "--out", str(tmp_path / "o")]
    refused = _eval("--preset", "reasonseg-val", "--dataset", "refcoco", *out)
    assert refused.exit_code == 2 and "contradicts" in refused.stderr
    refused = _eval("--preset", "reasonseg-val", "--split", "test", *out)
    assert refused.exit_code == 2 and "--split 'test'" in refused.stderr
    missing = _eval(*out)
    assert missing.exit_code == 2 and "--dataset NAME (or --preset NAME)" in missing.stderr
    unknown = _eval("--preset", "coco-val", *out)
    assert unknown.exit_code == 2
    baseline = _eval("--preset", "reasonseg-val", "--mode", "sam3-only", *out)
    assert baseline.exit_code == 0, baseline.output
    assert fakes["chats"] == []  # SAM 3 alone: no MLLM built
    with reading(tmp_path / "o", SampleResult.from_json) as store:
        assert (store.config() or {})["mode"] == "sam3-only"
