"""The ``sam3-agent`` application: each command lives in its own module."""

from __future__ import annotations

from typing import Annotated

import typer

from sam3_agent import __version__
from sam3_agent.cli.batch import batch_command
from sam3_agent.cli.evaluate import eval_command, report_command
from sam3_agent.cli.run import run_command
from sam3_agent.cli.serve import serve_sam3

app = typer.Typer(
    name="sam3-agent",
    help="A multimodal LLM that uses SAM 3 as a tool to segment what you describe.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sam3-agent {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """sam3-agent: segment what you describe, with an MLLM driving SAM 3."""


app.command("run")(run_command)
app.command("eval")(eval_command)
app.command("batch")(batch_command)
app.command("report")(report_command)
app.command("serve-sam3")(serve_sam3)
