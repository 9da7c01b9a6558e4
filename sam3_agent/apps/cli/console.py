"""What every command shares: the consoles, one-line errors, logging setup.

Both consoles soft-wrap: a line longer than the terminal (or than 80 columns when the
output is a file or a pipe) stays one line, so logs and ``grep`` see whole lines.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import typer
from rich.console import Console

from sam3_agent.values.errors import Sam3AgentError, UserError

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
"""Progress, status and errors."""

out_console = Console(highlight=False, soft_wrap=True)
"""Results a script may read (summaries)."""

EXIT_ERROR = 1
EXIT_USAGE = 2


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn library errors into one clean line on stderr and a non-zero exit code.

    ``UserError`` (bad input, bad option) exits with 2, other library errors with 1.
    Anything else is a bug and keeps its traceback.
    """
    try:
        yield
    except UserError as e:
        err_console.print(f"[red]error:[/red] {e}", soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from e
    except Sam3AgentError as e:
        err_console.print(f"[red]error:[/red] {type(e).__name__}: {e}", soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from e
    except KeyboardInterrupt as e:
        err_console.print("[yellow]interrupted[/yellow]")
        raise typer.Exit(130) from e


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
