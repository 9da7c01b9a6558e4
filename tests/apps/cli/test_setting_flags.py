"""Library messages name settings; the CLI shows each as its flag (one mapping)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sam3_agent.apps.cli.console import RENAMED, SAME_NAME, as_flags, flag_of
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, SAM3
from sam3_agent.apps.cli.flags.inputs import VIDEO
from sam3_agent.apps.cli.flags.jobs import ENGINE
from sam3_agent.apps.cli.main import app
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError


@pytest.mark.parametrize(
    ("library", "cli"),
    [
        ("`stride` must be >= 1, got 0", "--stride must be >= 1, got 0"),
        ("`end_s` (1.0) must be after `start_s` (3.0)", "--end (1.0) must be after --start (3.0)"),
        ("raise it with `max_image_pixels`", "raise it with --max-pixels"),
        ("`workers` applies to `engine='ray'`", "--workers applies to --engine ray"),
        ("`memory_check=False` if wrong", "--no-memory-check if wrong"),
        ("run once without `replay=True`", "run once without --replay"),
        ("(`llm_url=URL` `llm_model=NAME`)", "(--llm-url URL --llm-model NAME)"),
        ("`max_context_tokens=500` minus", "--max-context-tokens 500 minus"),
        # not settings a command takes: left as they are
        ("`max_mask_checks` must be >= 0", "`max_mask_checks` must be >= 0"),
        ("(`hf download org/x`)", "(`hf download org/x`)"),
        ("the local engine is 1 worker", "the local engine is 1 worker"),
    ],
)
def test_backticked_settings_become_flags(library: str, cli: str) -> None:
    assert as_flags(library) == cli


def command_flags() -> dict[str, str]:
    """Every option of every registered command: parameter name -> its long flag."""
    group = typer.main.get_command(app)
    ctx = group.make_context("sam3-agent", [], resilient_parsing=True)
    flags = {}
    for name in group.list_commands(ctx):
        command = group.resolve_command(ctx, [name])[1]
        assert command is not None
        for param in command.params:
            longs = [o for o in param.opts if o.startswith("--")]
            if param.name and longs:
                flags[param.name] = longs[0].split("/")[0]
    return flags


def test_every_flag_of_the_groups_is_the_flag_of_a_setting() -> None:
    declared = command_flags()
    mapped = {flag_of(s) for s in SAME_NAME | set(RENAMED)}
    for group in (BACKENDS, AGENT, ENGINE, VIDEO, SAM3):
        for f in group.flags:
            assert declared[f.name] in mapped, f.name


def test_every_mapped_flag_is_taken_by_a_command() -> None:
    taken = set(command_flags().values())
    for setting in SAME_NAME | set(RENAMED):
        assert flag_of(setting) in taken, setting


@pytest.mark.parametrize(
    ("build", "cli"),
    [
        (lambda: FrameSelection(stride=0), "--stride must be >= 1, got 0"),
        (lambda: FrameSelection(start_s=3.0, end_s=1.0), "--end (1.0) must be after --start"),
        (lambda: VideoOptions(frames_shown=40), "--frames-shown must be between 1 and 16"),
        (lambda: AgentConfig(max_image_pixels=0), "--max-pixels must be >= 1, got 0"),
        (lambda: AgentConfig(context_reserve_tokens=-1), "--reserve-tokens must be >= 0"),
    ],
)
def test_a_library_error_names_the_setting_and_the_cli_its_flag(
    build: Callable[[], object], cli: str
) -> None:
    with pytest.raises(UserError) as refused:
        build()
    library = str(refused.value)
    assert "--" not in library
    assert as_flags(library).startswith(cli)


def test_the_cli_prints_a_library_error_with_flags(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": "a", "image": "a.jpg", "query": "q"}\n')
    done = CliRunner().invoke(
        app, ["batch", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o"), "--workers", "2"]
    )
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        "error: --workers applies to --engine ray; the local engine is 1 worker"
    ]
