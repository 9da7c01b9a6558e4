"""The README's two Quick start commands are the ones CI runs, word for word."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", quick, flags=re.S)]


def _ci_commands() -> dict[str, str]:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    found = dict(re.findall(r"^(INSTALL_AND_\w+)=(.*)$", script, flags=re.M))
    return {name: shlex.split(value)[0] for name, value in found.items()}


def test_ci_runs_the_readme_quick_start_commands_word_for_word() -> None:
    readme = _readme_commands()
    ci = _ci_commands()
    assert readme[:2] == [ci["INSTALL_AND_RUN"], ci["INSTALL_AND_TEST"]]


def test_the_first_command_runs_the_agent_on_a_bundled_photo_and_the_second_the_tests() -> None:
    run, tests = _readme_commands()[:2]
    photo = shlex.split(run.rsplit(" && ", 1)[1])
    assert photo[:2] == ["sam3-agent", "run"] and (ROOT / photo[2]).is_file()
    assert tests.endswith("python -m pytest -q") and ".[dev" in tests


def test_ci_makes_fresh_virtual_environments_outside_the_checkout() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "mktemp -d" in script and "python3 -m venv" in script
    for command in ("ruff format --check", "ruff check", "mypy", "lint-imports"):
        assert re.search(rf"^{re.escape(command)}", script, flags=re.M), command
