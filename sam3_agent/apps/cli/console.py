"""What every command shares: the consoles, plain-text lines (never markup, control characters
visible), one-line errors, logging."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.text import Text

from sam3_agent.apps.cli.setting_flags import as_flags
from sam3_agent.values.errors import Sam3AgentError, UserError
from sam3_agent.values.text import visible

err_console = Console(stderr=True, highlight=False, soft_wrap=True)  # progress, errors
out_console = Console(highlight=False, soft_wrap=True)  # results a script may read

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_FAILED_SESSION = 3  # a session that ran and failed (result.json says why)


def plain(*parts: str | tuple[str, str]) -> Text:
    """One line of plain text from strings and ``(text, style)`` pairs."""
    line = Text()
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        line.append(visible(text), style=style)
    return line


def say(*parts: str | tuple[str, str], console: Console | None = None) -> None:
    """Print :func:`plain` ``parts`` as one line (on stderr unless ``console`` is given)."""
    (console or err_console).print(plain(*parts), soft_wrap=True)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Library errors as one plain line on stderr and exit 2 (UserError), 1 (other library
    errors) or 130 (Ctrl+C); a bug keeps its traceback."""
    try:
        yield
    except Sam3AgentError as e:
        for note in e.notes:
            say(as_flags(note))
        usage = isinstance(e, UserError)  # said as it is; another error names its type
        said = as_flags(str(e)) if usage else f"{type(e).__name__}: {as_flags(str(e))}"
        say(("error:", "red"), f" {said}")
        raise typer.Exit(EXIT_USAGE if usage else EXIT_ERROR) from e
    except KeyboardInterrupt as e:
        said = f": {as_flags(str(e))}" if str(e) else ""
        say(("interrupted", "yellow"), said)
        raise typer.Exit(EXIT_INTERRUPTED) from e


QUIET_MODEL_LIBRARIES = {"TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
"""Read by transformers and huggingface_hub when imported: no advice, warnings or progress bars."""


def setup_logging(verbose: bool) -> None:
    """Our logs at DEBUG with ``verbose``, else WARNING and the model libraries quiet."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        for name, value in QUIET_MODEL_LIBRARIES.items():
            os.environ.setdefault(name, value)
