"""``sam3-agent run IMAGE QUERY``: one request, with a live status line per round. Every flag
and path is checked before any model loads (or numpy, torch, HTTP clients import)."""

from __future__ import annotations

from typing import Annotated

import typer

from sam3_agent.apps.cli import request
from sam3_agent.apps.cli.console import one_line_errors
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS
from sam3_agent.apps.cli.flags.compose import VERBOSE, Mode, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig

ModeOpt = Annotated[Mode, typer.Option("--mode",
    help="agent: the MLLM drives SAM 3; sam3-only: SAM 3 alone with the query as its phrase "
    "(every mask above the threshold, no MLLM).")]  # fmt: skip
ExportOpt = Annotated[str | None, typer.Option("--export", metavar="FORMATS",
    help="Also write per-mask files: png (masks/NN.png, binary), polygons (in result.json); "
    "comma-separated.")]  # fmt: skip


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
    out: request.RunOutOpt = None,
    overwrite: request.OverwriteOpt = False,
    mode: ModeOpt = Mode.agent,
    export: ExportOpt = None,
    json_output: request.JsonOpt = False,
    resume: request.ResumeOpt = None,
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
    with one_line_errors(), request.LiveProgress() as progress:
        # A bad flag is refused before the library loads.
        backends.validate(chat=mode is not Mode.sam3_only)
        from sam3_agent.runs.rundirs import Output
        from sam3_agent.runs.single import segment_request

        done = segment_request(
            backends, image, query, config, Output(out, resume, overwrite), progress,
            sam3_only=mode is Mode.sam3_only, export=export, max_download_mb=max_download_mb,
        )  # fmt: skip
    request.say_finished(done, f"{len(done.result.detections)} mask(s)", json_output=json_output)
