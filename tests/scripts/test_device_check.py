"""``scripts/device_check.py`` on its CPU path (``--device cpu --tiny``), so the GPU check
cannot rot where no GPU runs it; and ``device_check.sh`` refusing to run without CUDA."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _script() -> object:
    return importlib.import_module("scripts.device_check")


def test_cpu_smoke_path_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    assert script.main(["--device", "cpu", "--tiny", "--repeats", "1"]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    for pattern in (
        r"SAM 3: tiny SAM 3 .*float32 on cpu",
        r"backbone forward per image \(224x224\): [\d.]+ ms",
        r"embed per 320x240 photo \(preprocess \+ backbone\): [\d.]+ ms",
        r"1 phrase on cached features: [\d.]+ ms, [\d.]+ ms per phrase",
        r"8 phrases on cached features: [\d.]+ ms, [\d.]+ ms per phrase",
        r"MLLM: tiny random Qwen2.5-VL .* on cpu",
        r"one round: chat call [\d.]+ ms \(\d+ prompt \+ \d+ completion tokens\)",
        r"device check done in [\d.]+ s",
    ):
        assert re.search(pattern, out), (pattern, out)


def test_cuda_requested_without_cuda_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert _script().main(["--device", "cuda"]) == 2  # type: ignore[attr-defined]
    assert "no CUDA device" in capsys.readouterr().out
    shell = subprocess.run(
        ["bash", str(REPO / "scripts" / "device_check.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable},  # this interpreter, venv active or not
    )
    assert shell.returncode != 0 and "no CUDA device here" in shell.stderr
