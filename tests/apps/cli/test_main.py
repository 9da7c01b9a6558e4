"""The command line starts light: ``--help``, ``--version`` and usage errors import no
heavy module (torch, transformers, openai, OpenCV, numpy, the web framework).

Each case runs in a fresh interpreter (a subprocess), where ``sys.modules`` says exactly
what one invocation imported. Timing is left to ``python -m scripts.bench startup``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import COMMANDS, app

ROOT = Path(__file__).resolve().parents[3]
HEAVY = (
    "torch",
    "transformers",
    "openai",
    "cv2",
    "numpy",
    "fastapi",
    "httpx",
    "pycocotools",
    "ray",
)

# Runs the CLI as `python -m sam3_agent.apps.cli.main ARGS` would, then prints the heavy top-level
# modules that ended up imported.
DRIVER = """
import contextlib, io, json, runpy, sys
heavy = json.loads(sys.argv[2])
sys.argv = ["sam3-agent", *json.loads(sys.argv[1])]
code = 0
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        runpy.run_module("sam3_agent.apps.cli.main", run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "heavy": sorted({m.split(".")[0] for m in sys.modules} & set(heavy))}))
"""


def imported_by(*args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(list(args)), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["run", "--help"], 0),
        (["eval", "--help"], 0),
        (["report", "--help"], 0),
        (["batch", "--help"], 0),
        (["run"], 2),  # missing arguments
        (["nonsense"], 2),  # unknown command
        (["run", "photo.jpg", "cat", "--max-image-side", "5"], 2),
        (["run", "photo.jpg", "cat", "--llm-url", "http://127.0.0.1:9/v1"], 2),
        (["eval", "--dataset", "reasonseg", "--root", "r", "--out", "o", "--replay"], 2),
        (["batch", "in.jsonl", "--out", "o", "--workers", "2"], 2),  # --workers needs ray
    ],
)
def test_help_version_and_usage_errors_import_nothing_heavy(args: list[str], code: int) -> None:
    seen = imported_by(*args)
    assert seen == {"code": code, "heavy": []}


def test_importing_the_package_is_light_and_exports_still_resolve() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, json, sam3_agent; "
            "before = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[1]))); "
            "sam3_agent.AgentConfig; "
            "print(json.dumps(before))",
            json.dumps(HEAVY),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert json.loads(done.stdout) == []


def test_lazy_exports_are_the_real_objects() -> None:
    import sam3_agent
    from sam3_agent.agent.api import segment
    from sam3_agent.agent.loop import Sam3Agent

    assert sam3_agent.Sam3Agent is Sam3Agent and sam3_agent.segment is segment
    assert set(sam3_agent.__all__) <= set(dir(sam3_agent))
    with pytest.raises(AttributeError):
        _ = sam3_agent.no_such_name


def test_listed_summaries_are_the_commands_first_doc_lines() -> None:
    import importlib

    for name, lazy in COMMANDS.items():
        function = getattr(importlib.import_module(lazy.module), lazy.function)
        first = (function.__doc__ or "").strip().splitlines()[0]
        assert lazy.summary == first, name


def test_top_level_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.stdout


def registered_commands() -> list[str]:
    group = typer.main.get_command(app)
    return list(group.list_commands(group.make_context("sam3-agent", [], resilient_parsing=True)))


NAMES = registered_commands()
TYPED = "abcdefghijklmnopqrstuvwxyz0123456789-"


@st.composite
def one_edit_typo(draw: st.DrawFn) -> tuple[str, str]:
    """A command name and that name with one character inserted, deleted or replaced."""
    name = draw(st.sampled_from(NAMES))
    at = draw(st.integers(0, len(name) - 1))
    char = draw(st.sampled_from(TYPED))
    typo = draw(
        st.sampled_from(
            [
                name[:at] + char + name[at:],
                name[:at] + name[at + 1 :],
                name[:at] + char + name[at + 1 :],
            ]
        )
    )
    return name, typo


TYPOS = one_edit_typo().filter(lambda t: t[1] not in NAMES and not t[1].startswith("-"))
"""One-edit typos that name no command and do not read as an option."""


@given(TYPOS)
def test_a_mistyped_command_is_one_line_naming_the_closest(typed: tuple[str, str]) -> None:
    name, typo = typed
    shown = CliRunner().invoke(app, [typo])
    assert shown.exit_code == 2
    assert shown.stderr.splitlines() == [f"error: no such command {typo!r}: did you mean {name}?"]


def test_a_command_like_no_other_lists_them_all() -> None:
    shown = CliRunner().invoke(app, ["xyzzy"])
    assert shown.exit_code == 2
    assert shown.stderr.splitlines() == [
        f"error: no such command 'xyzzy': the commands are {', '.join(NAMES)}"
    ]


def test_the_cli_uses_only_the_public_modules_of_typer_and_click() -> None:
    """typer ships a private copy of click (``typer._click``): no import names it, or any
    other underscored module of typer or click."""
    private = []
    for path in sorted((ROOT / "sam3_agent" / "apps" / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] in ("typer", "click") and any(p.startswith("_") for p in parts):
                    private.append(f"{path.name}: {name}")
    assert private == []
