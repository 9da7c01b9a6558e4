"""``sam3-agent inspect RUN_DIR``: a session round by round, in the terminal or as HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import one_line_errors, say


def inspect_command(
    run_dir: Annotated[
        Path, typer.Argument(help="A run directory (holding trace.jsonl), e.g. runs/<name>.")
    ],
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write one self-contained HTML file (images inline, opens offline) instead "
            "of printing.",
        ),
    ] = None,
    rounds: Annotated[
        list[int] | None,
        typer.Option("--round", "-r", metavar="N", help="Show only this round (repeatable)."),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", metavar="", help="Print texts uncut and every check's reply.")
    ] = False,
) -> None:
    """Show a session round by round from its run directory, in the terminal or as HTML.

    Each round: the context each call got (by zone, tokens per message), what was evicted
    and why, the reply, the tool outcome, timings, and the mask checks, folded.
    """
    with one_line_errors():
        from sam3_agent.apps.inspector import load_run

        run = load_run(run_dir)
        if html is not None:
            from sam3_agent.apps.inspector.html_page import render as render_html
            from sam3_agent.values.files import atomic_write_bytes

            try:
                atomic_write_bytes(html, render_html(run).encode("utf-8"))
            except OSError as e:
                from sam3_agent.values.errors import UserError

                raise UserError(f"cannot write {html}: {e}") from e
            say(f"wrote {html}")
            return
        from rich.console import Console

        from sam3_agent.apps.inspector.terminal import render

        render(run, Console(highlight=False), rounds=set(rounds) if rounds else None, full=full)
