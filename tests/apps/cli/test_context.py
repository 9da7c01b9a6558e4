"""The context flags of run, eval and demo: shown in --help, refused at once when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig

runner = CliRunner()


@pytest.mark.parametrize("command", ["run", "eval", "demo"])
def test_help_lists_the_context_flags(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "--context-policy" in result.output and "--max-context-tokens" in result.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--context-policy", "lru"], "--context-policy must be one of"),
        (
            ["--max-context-tokens", "100"],
            "--max-context-tokens (100) must exceed the reply reserve",
        ),
        (
            [
                "--context-policy",
                "attention",
                "--llm-url",
                "http://127.0.0.1:9/v1",
                "--llm-model",
                "m",
            ],
            "needs the in-process transformers MLLM",
        ),
    ],
)
@pytest.mark.parametrize("command", ["run", "eval", "demo"])
def test_bad_context_flags_fail_before_any_model_loads(
    command: str,
    flags: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    def no_models(self: BackendSpec) -> None:
        raise AssertionError("a model was built before the flags were checked")

    monkeypatch.setattr(BackendSpec, "build_segmenter", no_models)
    monkeypatch.setattr(BackendSpec, "build_chat_model", no_models)
    if command == "run":
        args = ["run", "assets/astronaut.jpg", "the flag", "--out", str(tmp_path / "out")]
    elif command == "eval":
        args = ["eval", "--dataset", "reasonseg", "--root", str(tmp_path), "--out", str(tmp_path)]
    else:
        args = ["demo", "--out", str(tmp_path / "out")]
    result = runner.invoke(app, [*args, *flags])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_the_policy_is_part_of_the_eval_run_settings() -> None:
    settings = AgentConfig(context_policy="fifo", max_context_tokens=8192).to_dict()
    assert settings["context_policy"] == "fifo" and settings["max_context_tokens"] == 8192
    assert AgentConfig().context_policy == CONTEXT_POLICIES[0] == "sam3"
