"""``sam3-agent run IMAGE QUERY`` and ``track VIDEO QUERY``: one request each, with a live
status line per round. Every flag and path is checked (and a video opened and indexed) before
any model loads (or numpy, torch, HTTP clients import)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.status import Status

from sam3_agent.apps.cli.console import (
    EXIT_FAILED_SESSION,
    as_flags,
    err_console,
    one_line_errors,
    plain,
    say,
)
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS
from sam3_agent.apps.cli.flags.compose import VERBOSE, Mode, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS, VIDEO, VideoFlags
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig

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
ModeOpt = Annotated[Mode, typer.Option("--mode",
    help="agent: the MLLM drives SAM 3; sam3-only: SAM 3 alone with the query as its phrase "
    "(every mask above the threshold, no MLLM).")]  # fmt: skip
ExportOpt = Annotated[str | None, typer.Option("--export", metavar="FORMATS",
    help="Also write per-mask files: png (masks/NN.png, binary), polygons (in result.json); "
    "comma-separated.")]  # fmt: skip


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


@with_flags(BACKENDS, AGENT, DOWNLOADS, VERBOSE)
def run_command(
    # Text, not a Path: a Path would fold the // of an http(s):// URL.
    image: Annotated[
        str,
        typer.Argument(
            metavar="IMAGE", help="The image (JPEG, PNG, ...): a file or an http(s):// URL."
        ),
    ],
    query: Annotated[
        str, typer.Argument(metavar="QUERY", help='What to segment, e.g. "the leftmost child".')
    ],
    out: RunOutOpt = None,
    overwrite: OverwriteOpt = False,
    mode: ModeOpt = Mode.agent,
    export: ExportOpt = None,
    json_output: JsonOpt = False,
    resume: ResumeOpt = None,
    *,
    backends: BackendSpec,
    config: AgentConfig,
    max_download_mb: int,
) -> None:
    """Segment what QUERY describes in IMAGE; write result.json, overlay.png, trace.jsonl.

    Exit codes: 0 masks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json), 130 interrupted (--resume DIR
    continues the session).
    """
    with one_line_errors(), LiveProgress() as progress:
        # A bad flag is refused before the library loads.
        backends.validate(chat=mode is not Mode.sam3_only)
        from sam3_agent.runs.rundirs import Output
        from sam3_agent.runs.single import segment_request

        done = segment_request(
            backends, image, query, config, Output(out, resume, overwrite), progress,
            sam3_only=mode is Mode.sam3_only, export=export, max_download_mb=max_download_mb,
        )  # fmt: skip
    say_finished(done, f"{len(done.result.detections)} mask(s)", json_output=json_output)


@with_flags(BACKENDS, AGENT, VIDEO, DOWNLOADS, VERBOSE)
def track_command(
    video: Annotated[str, typer.Argument(metavar="VIDEO",
        help="The video (MP4, MOV, WebM, ...): a file, an http(s):// URL or a folder of frame "
        "images.")],
    query: Annotated[str, typer.Argument(metavar="QUERY",
        help='What to segment and track, e.g. "the dog that enters last".')],
    out: TrackOutOpt = None,
    overwrite: OverwriteOpt = False,
    json_output: JsonOpt = False,
    resume: TrackResumeOpt = None,
    *, backends: BackendSpec, config: AgentConfig, video_flags: VideoFlags, max_download_mb: int,
) -> None:  # fmt: skip
    """Track what QUERY describes through VIDEO; write result.json, overlay.mp4, trace.jsonl.

    Also contact_sheet.png (sampled frames) and the checkpoint that --resume continues.

    Exit codes: 0 tracks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json), 130 interrupted (--resume DIR
    continues the session).
    """
    with one_line_errors(), LiveProgress() as progress:
        backends.validate()  # a bad flag is refused before the library loads
        from sam3_agent.runs.rundirs import Output
        from sam3_agent.runs.single import track_request

        done = track_request(
            replace(backends, video_cache_mb=video_flags.cache_mb), video, query, config,
            Output(out, resume, overwrite), progress,
            selection=video_flags.selection, options=video_flags.options,
            max_download_mb=max_download_mb,
        )  # fmt: skip
    say_finished(done, f"{len(done.result.tracks)} track(s)", json_output=json_output)
