"""``sam3-agent inspect RUN_DIR``: a session round by round, in the terminal or as HTML."""

from __future__ import annotations

from itertools import groupby
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.apps.cli.console import one_line_errors, say
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.values.errors import UserError


@with_flags(VERBOSE)
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
            "of printing (into a directory: <run name>.html).",
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
        from sam3_agent.apps.inspector.model import load_run

        run = load_run(run_dir)
        if rounds:
            _check_rounds(rounds, [view.number for view in run.rounds])
        if html is not None:
            from sam3_agent.apps.inspector.html_page import render as render_html
            from sam3_agent.values.files import atomic_write_bytes, safe_name

            if html.is_dir():  # the page goes inside, named after the run
                html = html / f"{safe_name(run_dir.resolve().name)}.html"
            try:
                atomic_write_bytes(html, render_html(run).encode("utf-8"))
            except OSError as e:
                # Not str(e): it names the temporary file beside the page.
                raise UserError(f"cannot write {html}: {e.strerror or type(e).__name__}") from e
            say(f"wrote {html}")
            return
        from rich.console import Console

        from sam3_agent.apps.inspector.terminal import render

        render(run, Console(highlight=False), rounds=set(rounds) if rounds else None, full=full)


def _check_rounds(asked: list[int], held: list[int]) -> None:
    """Refuse ``--round`` numbers the session does not hold, listing those it does."""
    if missing := sorted(set(asked) - set(held)):
        numbers = ", ".join(map(str, missing))
        which = f"round {numbers}" if len(missing) == 1 else f"rounds {numbers}"
        raise UserError(f"{which} not in this session: {_span_list(sorted(held))}")


def _span_list(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as "rounds are 1-3, 5"."""
    if not numbers:
        return "it has no rounds"
    # A span is a run of numbers whose difference to their position stays the same.
    runs = [[n for _, n in span] for _, span in groupby(enumerate(numbers), lambda p: p[1] - p[0])]
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"round is {text}" if len(numbers) == 1 else f"rounds are {text}"
