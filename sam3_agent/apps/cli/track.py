"""``sam3-agent track VIDEO QUERY``: one request on a video clip, a status line per round.

Every flag and path is checked, and the video opened and indexed, before any model loads.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, plain, say, say_outcome
from sam3_agent.apps.cli.flags import (
    AGENT,
    BACKENDS,
    VERBOSE,
    VIDEO,
    JsonOpt,
    OverwriteOpt,
    TrackOutOpt,
    TrackResumeOpt,
    VideoFlags,
    check_agent,
    with_flags,
)
from sam3_agent.apps.cli.outdir import check_out_flags, session_dir
from sam3_agent.apps.cli.setting_flags import as_flags
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.agent.video.result import VideoResult
    from sam3_agent.media.video import VideoSource


@with_flags(BACKENDS, AGENT, VIDEO, VERBOSE)
def track_command(
    video: Annotated[
        Path,
        typer.Argument(
            metavar="VIDEO", help="The video (MP4, MOV, WebM, ...) or a folder of frame images."
        ),
    ],
    query: Annotated[
        str,
        typer.Argument(
            metavar="QUERY", help='What to segment and track, e.g. "the dog that enters last".'
        ),
    ],
    out: TrackOutOpt = None,
    overwrite: OverwriteOpt = False,
    json_output: JsonOpt = False,
    resume: TrackResumeOpt = None,
    *,
    backends: BackendSpec,
    config: AgentConfig,
    video_flags: VideoFlags,
) -> None:
    """Track what QUERY describes through VIDEO; write result.json, overlay.mp4, trace.jsonl.

    Also contact_sheet.png (sampled frames) and the checkpoint that --resume continues.

    Exit codes: 0 tracks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json), 130 interrupted (--resume DIR
    continues the session).
    """
    with one_line_errors():
        backends = replace(backends, video_cache_mb=video_flags.cache_mb)
        backends.validate()
        check_agent(config, backends)
        check_out_flags(out, resume=resume, overwrite=overwrite, agent=True)

        from sam3_agent.agent.loop import check_query
        from sam3_agent.media.video import open_video
        from sam3_agent.values.files import safe_name

        check_query(query)
        # Opening indexes the frames (no pixel kept): a bad video fails here, in one line.
        source = open_video(video, video_flags.selection, max_pixels=config.max_image_pixels)
        if source.note:
            say(f"{video}: {source.note}")
        say(f"{video}: tracking {source.frame_count} of {source.source_frames} frames")
        plan = backends.plan(video=True)
        if plan.note:
            say(as_flags(plan.note))
        name = safe_name(f"{video.stem}-{query}", max_len=64)
        with session_dir(out, resume=resume, default_name=name) as out_dir:
            result = _track(plan.spec, source, query, config, video_flags, out_dir, resume=resume)

    if json_output:
        typer.echo(json.dumps(result.to_json(), indent=2))
    say_outcome(result, f"{len(result.tracks)} track(s)", out_dir)


def _track(
    spec: BackendSpec,
    source: VideoSource,
    query: str,
    config: AgentConfig,
    video_flags: VideoFlags,
    out_dir: Path,
    *,
    resume: Path | None,
) -> VideoResult:
    """The video agent on ``source``, with a live status line."""
    from sam3_agent.agent.events import RoundEvent
    from sam3_agent.agent.video.agent import Sam3VideoAgent

    with err_console.status(plain("loading models...")) as status:
        segmenter = spec.build_video_segmenter()
        chat_model = spec.build_chat_model()
        agent = Sam3VideoAgent(
            segmenter, chat_model, config, video_flags.options, video_flags.selection
        )
        status.update(plain(f"round 1: asking {chat_model.name}..."))

        def on_round(event: RoundEvent) -> None:
            say(f"round {event.round}: {event.tool or '(no tool)'} - {event.summary}")
            status.update(plain(f"round {event.round + 1}: asking {chat_model.name}..."))

        return agent.run(
            source, query, output_dir=out_dir, on_round=on_round, resume=resume is not None
        )
