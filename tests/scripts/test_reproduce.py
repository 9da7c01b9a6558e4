"""``scripts/reproduce.sh`` end to end on the fixture datasets: each preset evaluated in
its own run directory, then one report with the published rows. The real commands run in
subprocesses with the fake backends (``python -m tests.support.eval_cli_driver``); no server is started
because an endpoint URL is given (the fakes never call it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.eval_fixtures import write_reasonseg

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "reproduce.sh"
BASH = shutil.which("bash") or "/bin/bash"
STUBBED = ("curl", "wget", "nc", "ssh", "python", "python3", "sam3-agent", "mkdir", "sleep")
"""What the offline tests put on PATH, each a stub recording its call: nothing else runs."""


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


def _offline(
    tmp_path: Path, *args: str, vllm: bool
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script with nothing on PATH but stubs that record their call and fail: whatever
    it would run (a health check, a download, a model), the record shows. ``vllm``: whether
    a ``vllm`` is installed."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir(parents=True)
    for name in (*STUBBED, *(("vllm",) if vllm else ())):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/bash\necho "{name} $*" >> {calls}\nexit 1\n')
        stub.chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "LC_ALL": "C"}
    done = subprocess.run(
        [BASH, str(SCRIPT), *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    return done, calls


def test_dry_run_needs_no_server_and_reaches_nothing(tmp_path: Path) -> None:
    done, calls = _offline(tmp_path, "--data", "/d", "--port", "8123", "--dry-run", vllm=False)
    assert done.returncode == 0, done.stderr
    assert not calls.exists()  # no health check, no server, no sam3-agent: nothing ran
    assert not (tmp_path / "runs").exists()  # and nothing was written
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(
        "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --host 127.0.0.1 --port 8123 "
    )
    assert lines[1].startswith("# then wait until http://127.0.0.1:8123/v1/models answers")
    assert (
        "--llm-url http://127.0.0.1:8123/v1 " in lines[2] and "--preset reasonseg-val" in lines[2]
    )
    assert "--preset reasonseg-test" in lines[3]
    assert lines[4].startswith("sam3-agent report runs/reproduce/reasonseg-val ")
    assert len(lines) == 5
    assert "vllm is not installed" in done.stderr  # a note; the commands are still printed

    installed, calls = _offline(tmp_path / "v", "--data", "/d", "--dry-run", vllm=True)
    assert installed.returncode == 0 and installed.stderr == ""
    assert installed.stdout.splitlines()[0].startswith("vllm serve ")
    assert not calls.exists()  # printed, not started


def test_without_dry_run_a_missing_vllm_is_still_refused(tmp_path: Path) -> None:
    done, calls = _offline(tmp_path, "--data", "/d", vllm=False)
    assert done.returncode == 2
    assert "no --llm-url given and vllm is not installed" in done.stderr
    assert done.stdout == "" and not calls.exists()
