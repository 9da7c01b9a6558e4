"""What every command shares: the consoles, plain-text lines (never markup, control characters
visible), library settings shown as flags, one-line errors, logging."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.text import Text

from sam3_agent.values.errors import Sam3AgentError, UserError
from sam3_agent.values.text import visible

err_console = Console(stderr=True, highlight=False, soft_wrap=True)  # progress, errors
out_console = Console(highlight=False, soft_wrap=True)  # results a script may read

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_FAILED_SESSION = 3  # a session that ran and failed (result.json says why)


# Library messages name a setting in backticks (`` `engine='ray'` ``); as_flags shows it as
# the flag a CLI user types (``--engine ray``).

RENAMED = {
    "max_image_pixels": "--max-pixels",
    "prompts_dir": "--prompts",
    "context_reserve_tokens": "--reserve-tokens",
    "start_s": "--start",
    "end_s": "--end",
    "sam3_cache_size": "--cache-size",
    "tool_set": "--tools",
}
"""Settings whose flag is not their name with dashes (``AgentConfig``, ``FrameSelection``,
``BackendSpec`` fields)."""

SETTING_OF = {flag[2:].replace("-", "_"): setting for setting, flag in RENAMED.items()}
"""The setting a renamed flag's value fills (its parameter ``max_pixels``: ``max_image_pixels``)."""

SAME_NAME = frozenset(
    {
        # BackendSpec
        "sam3", "sam3_url", "sam3_token", "device", "dtype", "llm", "llm_url", "llm_model",
        "llm_api_key", "llm_timeout", "temperature", "max_tokens", "seed", "llm_extra",
        "memory_check", "tool_protocol", "cache", "replay", "video_cache_mb",
        # AgentConfig
        "max_rounds", "max_corrections", "check_concurrency", "score_threshold",
        "max_image_side", "context_policy", "max_context_tokens",
        # EngineOptions
        "concurrency", "engine", "ray_address", "workers", "gpus_per_worker",
        # FrameSelection, VideoOptions
        "stride", "max_frames", "fps", "frames_shown", "check_frames", "uncertain_looks",
        # arguments of the evaluation and batch runs
        "out", "dataset", "preset", "split", "images", "all_texts", "limit", "shard", "mode",
        "query", "export",
        # arguments of one request (run, track)
        "resume", "overwrite",
    }
)  # fmt: skip
"""Settings whose flag is their name with dashes (``llm_url``: ``--llm-url``)."""

_NAMED = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")


def flag_of(setting: str) -> str | None:
    """The flag of ``setting``; ``None`` for a setting no command takes."""
    if setting in SAME_NAME:
        return "--" + setting.replace("_", "-")
    return RENAMED.get(setting)


def as_flags(message: str) -> str:
    """``message`` with each backticked setting (and its value) written as its flag."""

    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        option = flag_of(name)
        if option is None:
            return match.group()
        if value is None or value == "True":
            return option
        if value == "False":
            return "--no-" + option[2:]
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        return f"{option} {value}"

    return _NAMED.sub(flag, message)


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
