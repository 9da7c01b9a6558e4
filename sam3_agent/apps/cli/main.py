"""The ``sam3-agent`` application: each command lives in its own module, imported only when
it is invoked (:mod:`.loader`)."""

from __future__ import annotations

from typing import Annotated

import typer

from sam3_agent.apps.cli.loader import COMMANDS, LazyGroup
from sam3_agent.values.version import __version__

__all__ = ["COMMANDS", "app"]

app = typer.Typer(
    name="sam3-agent",
    cls=LazyGroup,
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
        bool,
        typer.Option(
            "--version", metavar="", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """sam3-agent: segment what you describe, with an MLLM driving SAM 3."""


if __name__ == "__main__":  # python -m sam3_agent.apps.cli.main: the same as `sam3-agent`
    app(prog_name="sam3-agent")
