"""``eval`` / ``report`` with the fake backends, in this process or in one of its own.

``python -m tests.support.eval_cli_driver [--video] [--delay S] eval --dataset ... --out ...``
runs the real commands with the fakes of :mod:`tests.support.eval_fixtures` (with
``--video``: of :mod:`tests.support.video_eval_fixtures`), every MLLM call waiting ``S``
seconds; :func:`kill_after_first_commit` kills it part-way so that a test can check what
survives. In-process tests patch the same fakes in with :func:`use_fake_backends`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from tests.support import eval_fixtures, video_eval_fixtures
from tests.support.fake_hub import use_fake_hub

REPO = Path(__file__).resolve().parents[2]
PLENTY = memory.MemoryReading("cpu", 1 << 50, 1 << 50)
"""The fakes need no memory: the memory check must not depend on this machine's."""


def make_app() -> typer.Typer:
    """The real ``sam3-agent`` application (the fakes come from :func:`use_fake_backends`)."""
    return app


def use_fake_backends(
    delay_s: float = 0.0,
    *,
    video: bool = False,
    patch: Callable[[Any, str, Any], None] = setattr,
) -> dict[str, list[Any]]:
    """Make every BackendSpec build the eval fixtures' fakes (the video fixtures' with
    ``video``), each MLLM call waiting ``delay_s``, through ``patch`` (a test's
    ``monkeypatch.setattr``; ``setattr`` in a process of its own).

    Returns what was built, as it is: ``segmenters``, ``chats``, and the ``options`` (the
    BackendSpec) each segmenter was built from.
    """
    made: dict[str, list[Any]] = {"segmenters": [], "chats": [], "options": []}
    if video:
        segmenter: Callable[[], Any] = video_eval_fixtures.make_video_segmenter
        chat_model: Callable[..., Any] = video_eval_fixtures.make_chat_model
    else:
        segmenter, chat_model = eval_fixtures.make_segmenter, eval_fixtures.make_chat_model

    def build_segmenter(self: BackendSpec) -> Any:
        made["options"].append(self)
        made["segmenters"].append(segmenter())
        return made["segmenters"][-1]

    def build_chat_model(self: BackendSpec) -> Any:
        made["chats"].append(chat_model(delay_s=delay_s))
        return made["chats"][-1]

    patch(BackendSpec, "build_video_segmenter" if video else "build_segmenter", build_segmenter)
    patch(BackendSpec, "build_chat_model", build_chat_model)
    patch(memory, "read_memory", lambda device: PLENTY)
    return made


def count_stored(db: Path) -> int:
    """Samples committed to the results database ``db`` (0 before it exists)."""
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # not created yet


def kill_after_first_commit(args: Sequence[str], run: Path, *, video: bool = False) -> int:
    """``eval --no-progress *args --out run`` in a process of its own, every MLLM call taking
    0.3 s, killed (SIGKILL) right after its first commit; how many samples it stored."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    driver = [sys.executable, "-m", "tests.support.eval_cli_driver", *(["--video"] * video)]
    proc = subprocess.Popen(
        [*driver, "--delay", "0.3", "eval", "--no-progress", *args, "--out", str(run)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # Each sample takes 1-2 scripted calls of 0.3 s: kill right after the first commit.
        while count_stored(run / "results.sqlite") < 1 and proc.poll() is None:
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    return count_stored(run / "results.sqlite")


if __name__ == "__main__":
    args = sys.argv[1:]
    video = args[:1] == ["--video"]
    if video:
        args = args[1:]
    delay = 0.0
    if args[:1] == ["--delay"]:
        delay, args = float(args[1]), args[2:]
    use_fake_backends(delay, video=video)
    use_fake_hub()  # nothing asks the real hub whether a model exists
    make_app()(args)
