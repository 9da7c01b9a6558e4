"""Every flag group is declared once and composed: the commands that take a group expose
exactly its options, and the console prints outside text as plain text."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer._click.core import Context  # typer's own copy of click
from typer.core import TyperOption
from typer.testing import CliRunner

from sam3_agent.apps.cli import console as console_module
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, SAM3
from sam3_agent.apps.cli.flags.compose import FlagGroup
from sam3_agent.apps.cli.flags.jobs import ENGINE
from sam3_agent.apps.cli.main import COMMANDS, app
from sam3_agent.backends.spec import BackendSpec

ROOT = Path(__file__).resolve().parent.parent

runner = CliRunner()


def options_of(name: str) -> dict[str, tuple[str, ...]]:
    """The click options of command ``name``: parameter name -> its option strings."""
    command = COMMANDS[name].load(name)
    return {p.name: tuple(sorted(p.opts)) for p in command.params if p.name and not p.hidden}


def group_options(group: FlagGroup) -> set[str]:
    return {f.name for f in group.flags}


@pytest.mark.parametrize("group", [BACKENDS, AGENT], ids=["backends", "agent+context"])
def test_run_eval_batch_and_demo_expose_the_same_backend_agent_and_context_flags(
    group: FlagGroup,
) -> None:
    names = group_options(group)
    seen = {
        command: {k: v for k, v in options_of(command).items() if k in names}
        for command in ("run", "eval", "batch", "demo")
    }
    assert set(seen["run"]) == names
    assert seen["eval"] == seen["run"] == seen["batch"] == seen["demo"]


def test_the_context_group_and_the_flags_that_drifted_are_everywhere() -> None:
    for command in ("run", "eval", "batch", "demo"):
        flags = {o for opts in options_of(command).values() for o in opts}
        for flag in (
            "--context-policy",
            "--max-context-tokens",
            "--reserve-tokens",
            "--max-pixels",
        ):
            assert flag in flags, (command, flag)
    assert "-o" in options_of("eval")["out"]


def test_eval_and_batch_share_the_engine_flags() -> None:
    names = group_options(ENGINE)
    eval_engine = {k: v for k, v in options_of("eval").items() if k in names}
    batch_engine = {k: v for k, v in options_of("batch").items() if k in names}
    assert set(eval_engine) == names and eval_engine == batch_engine


def test_serve_sam3_takes_the_sam3_flags_of_the_other_commands() -> None:
    serve = options_of("serve-sam3")
    run = options_of("run")
    for name in group_options(SAM3):
        assert serve[name] == run[name]
    assert serve["sam3"] == ("--sam3",) and "--verbose" in serve["verbose"]
    hidden = [p for p in COMMANDS["serve-sam3"].load("serve-sam3").params if p.hidden]
    assert [p.opts for p in hidden] == [["--model"]]  # the former spelling still parses


def registered_commands() -> list[str]:
    """Every command the application lists (its group's ``list_commands``)."""
    group = typer.main.get_command(app)
    return list(group.list_commands(group.make_context("sam3-agent", [], resilient_parsing=True)))


@pytest.mark.parametrize("verbose", ["-v", "--verbose"])
def test_every_command_takes_the_verbose_flag(verbose: str) -> None:
    names = registered_commands()
    assert set(COMMANDS) <= set(names)
    for name in names:
        # click parses every option before the eager --help: an unknown flag exits 2
        shown = runner.invoke(app, [name, verbose, "--help"])
        assert shown.exit_code == 0, (name, shown.output)


PLACEHOLDER = re.compile(r"(?:[a-z]+:)?[A-Z][A-Z0-9_/]*")
"""A value's placeholder in ``--help``: ``N``, ``URL``, ``I/N``, ``hf:MODEL``."""


def every_option() -> list[tuple[str, TyperOption, Context]]:
    """Every option of the app, ``--help`` and ``--version`` included, walking the command
    tree from the root group: (command, option, the command's context)."""
    root = typer.main.get_command(app)
    root_ctx = Context(root, info_name="sam3-agent")
    found = [("sam3-agent", p, root_ctx) for p in root.get_params(root_ctx)]
    for name in root.list_commands(root_ctx):
        _, command, _ = root.resolve_command(root_ctx, [name])
        assert command is not None
        ctx = Context(command, info_name=name, parent=root_ctx)
        found += [(name, p, ctx) for p in command.get_params(ctx)]
    return [(n, p, c) for n, p, c in found if isinstance(p, TyperOption)]


def test_every_option_shows_a_placeholder_or_its_choices_never_a_type_name() -> None:
    options = every_option()
    wrong = []
    for command, option, ctx in options:
        shown = option.display_type_rich(ctx)  # what --help prints after the option's names
        described = option.type_descriptor
        if option.is_flag:
            right = shown == ""
        elif described.is_choice and described.choices:
            values = [str(getattr(c, "value", c)) for c in described.choices]
            right = shown == "<" + "|".join(values) + ">"
        else:
            right = PLACEHOLDER.fullmatch(shown or "") is not None
        if not right:
            wrong.append(f"{command} {option.opts[0]}: {shown!r}")
    assert wrong == []
    assert len({c for c, _, _ in options}) == len(COMMANDS) + 1 and len(options) > 100


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS)], ids=["root", *COMMANDS])
def test_no_help_shows_a_type_where_a_value_goes(command: list[str]) -> None:
    shown = runner.invoke(app, [*command, "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "--help" in shown.output
    for type_name in ("<bool>", "<int", "<float>", "list[str]", "list[int]"):
        assert type_name not in shown.output, (command, type_name)


@pytest.mark.parametrize(
    ("command", "medium", "wrong"),
    [
        ("run", "IMAGE", ("VIDEO", "<video>")),
        ("track", "VIDEO", ("IMAGE", "<image>", "input image,")),
    ],
)
def test_a_commands_help_speaks_of_its_own_medium(
    command: str, medium: str, wrong: tuple[str, ...]
) -> None:
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "300"}).output
    assert f"{{{medium}}} {{QUERY}}" in shown  # the usage line names what the text speaks of
    for word in wrong:
        assert word not in shown, word


def test_the_commands_help_still_answers_without_importing_heavy_modules() -> None:
    heavy = ("torch", "transformers", "openai", "cv2", "numpy", "fastapi", "httpx", "ray")
    script = (
        "import sys, runpy, contextlib, io\n"
        "for name in sys.argv[1:]:\n"
        "    sys.argv = ['sam3-agent', name, '--help']\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            runpy.run_module('sam3_agent.apps.cli.main', run_name='__main__')\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0, (name, e.code)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *COMMANDS],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reserve-tokens", "-1"], "--reserve-tokens must be >= 0"),
        (["--reserve-tokens", "40000"], "must exceed the reply reserve (--reserve-tokens 40000)"),
        (["--max-pixels", "0"], "--max-pixels must be"),
    ],
)
def test_new_agent_flags_are_refused_in_one_line_naming_them(
    args: list[str], message: str, tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("")
    result = runner.invoke(app, ["batch", str(source), "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_serve_sam3_fails_in_one_line_with_the_exit_code_of_a_usage_error() -> None:
    result = runner.invoke(app, ["serve-sam3", "--sam3", " ", "--max-pixels", "0"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --sam3 must name a hub id or a local directory"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "--port must be in 1..65535, got 99999"),
        (["--max-upload-mb", "nan"], "--max-upload-mb must be a positive number"),
        (["--max-upload-mb", "inf"], "--max-upload-mb must be a positive number"),
        (["--max-concurrent-segments", "0"], "--max-concurrent-segments must be a positive"),
        (["--max-concurrent-uploads", "0"], "--max-concurrent-uploads must be a positive"),
        (["--max-waiting", "-1"], "--max-waiting must be a count >= 0, got -1"),
        (["--max-upload-mb", "1e-9"], "max_upload_bytes must be >= 1, got 0"),
    ],
)
def test_serve_sam3_refuses_a_bad_limit_before_loading_anything(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_load(self: object) -> None:
        raise AssertionError("SAM 3 was built before the flags were checked")

    monkeypatch.setattr(BackendSpec, "build_segmenter", no_load)
    result = runner.invoke(app, ["serve-sam3", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


# -- the console: outside text is plain text ---------------------------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    buffer = io.StringIO()
    monkeypatch.setattr(
        console_module, "err_console", Console(file=buffer, width=60, highlight=False)
    )
    return buffer


def test_brackets_are_printed_as_they_are(captured: io.StringIO) -> None:
    from sam3_agent.values.errors import UserError

    with pytest.raises(typer.Exit) as stopped, console_module.one_line_errors():
        raise UserError('the Ray engine needs Ray: pip install "sam3-agent[ray]" [/x] [bold]')
    assert stopped.value.exit_code == 2
    assert captured.getvalue() == (
        'error: the Ray engine needs Ray: pip install "sam3-agent[ray]" [/x] [bold]\n'
    )


ODD = st.sampled_from(["[/x]", "[bold]", "\x1b[2J", "\ud800", "\udfff", "\x00", "\u202e", "\r"])


@given(st.lists(st.text() | ODD).map("".join))
def test_say_prints_any_text_plainly_on_one_line(text: str) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=40, highlight=False, soft_wrap=True)
    console_module.say(("round 1:", "bold"), f" {text}", console=console)
    shown = buffer.getvalue()
    assert shown.count("\n") == 1 + text.count("\n")  # no line added, none hidden
    for invisible in ("\x1b", "\x00", "\x7f", "\r", "\u202e", "\ud800", "\udfff"):
        assert invisible not in shown
    shown.encode("utf-8")  # writable to a UTF-8 terminal or file
    assert shown.count("[") == text.count("[")  # brackets are text, never markup
