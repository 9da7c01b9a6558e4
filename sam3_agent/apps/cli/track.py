"""``sam3-agent track VIDEO QUERY``: one request on a video clip, a status line per round.
Every flag and path is checked, and the video opened and indexed, before any model loads."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from sam3_agent.apps.cli import request
from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS, VIDEO, VideoFlags
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig


@with_flags(BACKENDS, AGENT, VIDEO, DOWNLOADS, VERBOSE)
def track_command(
    video: Annotated[str, typer.Argument(metavar="VIDEO",
        help="The video (MP4, MOV, WebM, ...): a file, an http(s):// URL or a folder of frame "
        "images.")],
    query: Annotated[str, typer.Argument(metavar="QUERY",
        help='What to segment and track, e.g. "the dog that enters last".')],
    out: request.TrackOutOpt = None,
    overwrite: request.OverwriteOpt = False,
    json_output: request.JsonOpt = False,
    resume: request.TrackResumeOpt = None,
    *, backends: BackendSpec, config: AgentConfig, video_flags: VideoFlags, max_download_mb: int,
) -> None:  # fmt: skip
    """Track what QUERY describes through VIDEO; write result.json, overlay.mp4, trace.jsonl.

    Also contact_sheet.png (sampled frames) and the checkpoint that --resume continues.

    Exit codes: 0 tracks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json), 130 interrupted (--resume DIR
    continues the session).
    """
    with one_line_errors(), request.LiveProgress() as progress:
        backends.validate()  # a bad flag is refused before the library loads
        from sam3_agent.runs.rundirs import Output
        from sam3_agent.runs.single import track_request

        done = track_request(
            replace(backends, video_cache_mb=video_flags.cache_mb), video, query, config,
            Output(out, resume, overwrite), progress,
            selection=video_flags.selection, options=video_flags.options,
            max_download_mb=max_download_mb,
        )  # fmt: skip
    request.say_finished(done, f"{len(done.result.tracks)} track(s)", json_output=json_output)
