"""The package's public API: every name resolves, and importing it loads nothing heavy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sam3_agent.runs.evaluation.video as video


def test_every_public_name_resolves() -> None:
    for name in video.__all__:
        assert getattr(video, name) is not None


def test_importing_the_package_loads_no_numpy_or_opencv() -> None:
    code = (
        "import sys, sam3_agent.runs.evaluation.video\n"
        "print(sorted(m for m in ('numpy', 'cv2', 'pycocotools') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(video.__file__).parents[4])},
    )
    assert out.stdout.strip() == "[]"
