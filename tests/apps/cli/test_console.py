"""What a command prints on stderr besides its own lines: the model libraries stay quiet
unless ``--verbose`` (``console.setup_logging``). Each case is a fresh process, as a user's
command is: the libraries read their switches when imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sam3_agent.apps.cli.console import QUIET_MODEL_LIBRARIES
from tests.support.video_cli import square_picker, tiny_video_flags

ROOT = Path(__file__).resolve().parents[3]
NOISE = ("Loading weights", "[transformers]")


def fresh_env() -> dict[str, str]:
    """This process's environment without the switches (a test run in-process may have set
    them here) and offline, with this checkout importable."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_MODEL_LIBRARIES}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_a_run_on_sam3_loads_it_quietly_unless_verbose(
    verbose: bool, tmp_path: Path, tiny_sam3_dir: Path, image: np.ndarray
) -> None:
    photo = tmp_path / "photo.png"
    Image.fromarray(image).save(photo)
    with square_picker() as mllm:
        done = subprocess.run(
            [
                sys.executable, "-m", "sam3_agent.apps.cli.main", "run", str(photo), "the square",
                "--out", str(tmp_path / "out"), *tiny_video_flags(tiny_sam3_dir, mllm),
                *(["--verbose"] if verbose else []),
            ],
            capture_output=True, text=True, env=fresh_env(), timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "round 1: segment_phrase" in done.stderr
    if verbose:
        assert "Loading weights" in done.stderr and " DEBUG " in done.stderr
    else:
        assert not [line for line in done.stderr.splitlines() if line.startswith(NOISE)]


PROBE = """
import sys
from sam3_agent.apps.cli.console import setup_logging
setup_logging(sys.argv[1] == "verbose")
from transformers.utils import logging
logging.get_logger("transformers.models.sam3_video").warning(
    "kernels library is not installed. NMS post-processing ... will be skipped."
)
"""


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_transformers_warnings_are_shown_only_with_verbose(verbose: bool) -> None:
    # The warnings of SAM 3's video model, as tracking writes them (a track run on the tiny
    # model takes too long to repeat here; its loading is the test above).
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "verbose" if verbose else "quiet"],
        capture_output=True, text=True, env=fresh_env(), timeout=300, check=True,
    )  # fmt: skip
    assert ("kernels library is not installed" in done.stderr) == verbose


def test_a_verbosity_the_user_chose_wins() -> None:
    env = {**fresh_env(), "TRANSFORMERS_VERBOSITY": "warning"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "quiet"],
        capture_output=True, text=True, env=env, timeout=300, check=True,
    )  # fmt: skip
    assert "kernels library is not installed" in done.stderr
