"""``scripts/reproduce.sh`` end to end on the fixture datasets: each preset evaluated in
its own run directory, then one report with the published rows. The real commands run in
subprocesses with the fake backends (``python -m tests.support.eval_cli_driver``); no server is started
because an endpoint URL is given (the fakes never call it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.eval_fixtures import write_reasonseg

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "reproduce.sh"


def _script(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SAM3_AGENT": f"{sys.executable} -m tests.support.eval_cli_driver",
    }
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )


def test_presets_then_one_report(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_reasonseg(data / "reasonseg", "val")
    write_reasonseg(data / "reasonseg", "test")
    out = tmp_path / "out"
    done = _script(
        "--data", str(data), "--llm-url", "http://127.0.0.1:9/v1", "--out", str(out),
        tmp_path=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for preset in ("reasonseg-val", "reasonseg-test"):
        assert (out / preset / "results.sqlite").is_file()
    md = (out / "report" / "report.md").read_text()
    assert "| SAM 3 Agent, Qwen2.5-VL 7B (published) | 62.2 |" in md
    assert "Against the published figures" in md  # the default model is the paper's 7B


def test_dry_run_prints_the_commands_and_bad_arguments_exit_2(tmp_path: Path) -> None:
    done = _script(
        "--data", "/d", "--llm-url", "http://h:1/v1", "--presets", "refcoco+-val grefcoco-val",
        "--dry-run", "--", "--limit", "5", tmp_path=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 3
    assert "eval --preset refcoco+-val --root /d/refcoco+ " in lines[0]
    assert lines[0].rstrip().endswith("--no-progress --limit 5")
    assert "--preset grefcoco-val --root /d/grefcoco" in lines[1]
    assert " report " in lines[2] and lines[2].rstrip().endswith("--out runs/reproduce/report")
    assert _script(tmp_path=tmp_path).returncode == 2  # no --data
    assert _script("--bogus", tmp_path=tmp_path).returncode == 2
