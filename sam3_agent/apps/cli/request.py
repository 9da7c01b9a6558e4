"""What ``run`` and ``track`` share: their output flags, a request's progress shown live, its
outcome said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.status import Status

from sam3_agent.apps.cli.console import EXIT_FAILED_SESSION, as_flags, err_console, plain, say

if TYPE_CHECKING:
    from sam3_agent.agent.events import RoundEvent
    from sam3_agent.runs.single import Finished


def _out(medium: str) -> Any:
    help = f"Output directory (default: runs/<time>-<{medium}>-<query>)."
    return typer.Option("--out", "-o", metavar="DIR", help=help)


def _resume(same: str) -> Any:
    help = "Continue the interrupted session in this run directory, from its last committed "
    return typer.Option("--resume", metavar="DIR", help=f"{help}round (give the same {same}).")


RunOutOpt = Annotated[Path | None, _out("image")]
TrackOutOpt = Annotated[Path | None, _out("video")]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", metavar="",
    help="Replace a previous run's files in --out (nothing else).")]  # fmt: skip
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print result.json to stdout.")]
ResumeOpt = Annotated[Path | None, _resume("IMAGE, QUERY and agent flags")]
TrackResumeOpt = Annotated[Path | None, _resume("VIDEO, QUERY, agent and video flags")]


class LiveProgress:
    """A request's progress on stderr: notes and rounds as lines, the status live below."""

    def __init__(self) -> None:
        self._live: Status | None = None

    def note(self, line: str) -> None:
        say(as_flags(line))

    def round(self, event: RoundEvent) -> None:
        say(f"round {event.round}: {event.tool or '(no tool)'} - {event.summary}")

    def status(self, line: str) -> None:
        if self._live is None:
            self._live = err_console.status(plain(line))
            self._live.start()
        else:
            self._live.update(plain(line))

    def __enter__(self) -> LiveProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()


def say_finished(done: Finished[Any], found: str, *, json_output: bool) -> None:
    """``result.json`` on stdout with ``json_output``, then the session's last line
    (``found``: e.g. "2 mask(s)"); a failed session exits with :data:`EXIT_FAILED_SESSION`."""
    if json_output:
        typer.echo(json.dumps(done.document, indent=2))
    result = done.result
    outcome = {
        "masks": ((found, "green"), ""),
        "no_mask": (("no mask", "yellow"), " (nothing matching was found)"),
        "failed": (("failed", "red"), f": {as_flags(result.failure or '')}"),
    }[result.status]
    tokens, seconds = result.usage.total.total_tokens, result.timings["total"]
    say(
        *outcome,
        f" in {result.rounds} round(s), {tokens} tokens, {seconds:.1f} s -> {done.directory}",
    )
    if result.status == "failed":
        raise typer.Exit(EXIT_FAILED_SESSION)
