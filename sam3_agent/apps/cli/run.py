"""``sam3-agent run IMAGE QUERY``: one request, with a live status line per round.

Every flag and path is checked before any model loads (or numpy, torch, HTTP clients import).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sam3_agent.apps.cli.console import err_console, one_line_errors, plain, say, say_outcome
from sam3_agent.apps.cli.flags import (
    AGENT,
    BACKENDS,
    VERBOSE,
    ExportOpt,
    JsonOpt,
    Mode,
    OverwriteOpt,
    ResumeOpt,
    RunOutOpt,
    check_agent,
    with_flags,
)
from sam3_agent.apps.cli.outdir import check_out_flags, session_dir
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.agent.checkpoint import Committed
    from sam3_agent.agent.export import ExportFormat
    from sam3_agent.agent.result import AgentResult
    from sam3_agent.values.images import RGBImage


ModeOpt = Annotated[
    Mode,
    typer.Option(
        "--mode",
        help="agent: the MLLM drives SAM 3; sam3-only: SAM 3 alone with the query as its phrase "
        "(every mask above the threshold, no MLLM).",
    ),
]


@with_flags(BACKENDS, AGENT, VERBOSE)
def run_command(
    image: Annotated[Path, typer.Argument(metavar="IMAGE", help="The image (JPEG, PNG, ...).")],
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
) -> None:
    """Segment what QUERY describes in IMAGE; write result.json, overlay.png, trace.jsonl.

    Exit codes: 0 masks found or no mask reported, 1 backend error, 2 bad input,
    3 the session failed (budget spent; see result.json), 130 interrupted (--resume DIR
    continues the session).
    """
    sam3_only = mode is Mode.sam3_only
    with one_line_errors():
        # Every flag and path first: a refusal must not cost minutes of loading models.
        backends.validate(chat=not sam3_only)
        check_agent(config, backends, chat=not sam3_only)
        check_out_flags(out, resume=resume, overwrite=overwrite, agent=not sam3_only)

        from sam3_agent.agent.export import parse_exports
        from sam3_agent.agent.loop import check_query
        from sam3_agent.agent.rundir import result_document
        from sam3_agent.values.files import safe_name
        from sam3_agent.values.images import load_image

        formats = parse_exports(export)
        check_query(query)
        pixels = load_image(image, max_pixels=config.max_image_pixels)
        found = None
        if resume is not None:  # everything the run directory can refuse, before any model
            found = _check_resume(resume, backends, query, pixels, config, planned=False)
            if not found.backends_recorded:
                say(
                    f"{resume} was saved by an earlier version, which did not record its models "
                    "and generation settings: they are not compared"
                )
        if resume is not None and found is not None and found.ended:
            from sam3_agent.agent.ended import finish_ended

            # Nothing left to ask: the committed ending, its outputs written again, no model.
            say(f"the session in {resume} ended after round {found.round}: no model to load")
            out_dir, result = (
                resume,
                finish_ended(
                    resume, pixels, query, config=config, image_path=image, exports=formats
                ),
            )
        else:
            # Which default MLLM, and do the models fit: before any download, any directory.
            plan = backends.plan(chat=not sam3_only)
            if plan.note:
                say(plan.note)
            if resume is not None and found is not None:
                _check_resume(resume, plan.spec, query, pixels, config, planned=True)
                say(f"resuming {resume} after round {found.round}")
            # Only now is anything written: a bad image leaves no output directory behind.
            name = safe_name(f"{image.stem}-{query}", max_len=64)
            with session_dir(out, resume=resume, default_name=name) as out_dir:
                # The decoded pixels go on (one decode); the run writes result.json once.
                result = _run(
                    plan.spec, pixels, image, query, config, out_dir, formats,
                    resume=resume is not None, sam3_only=sam3_only,
                )  # fmt: skip

    if json_output:
        typer.echo(json.dumps(result_document(result, formats), indent=2))
    say_outcome(result, f"{len(result.detections)} mask(s)", out_dir)


def _check_resume(
    directory: Path, spec: BackendSpec, query: str, pixels: RGBImage, config: AgentConfig,
    *, planned: bool,
) -> Committed:  # fmt: skip
    """:func:`check_resumable` with what the options say of the models: before
    :meth:`BackendSpec.plan` what the flags alone say, after it (``planned``) the default
    MLLM and what ``--dtype auto`` means here too."""
    from sam3_agent.agent.checkpoint import check_resumable

    return check_resumable(
        directory, query=query, image=pixels, config=config,
        model=spec.model_name(), backends=spec.describe(resolve=planned),
    )  # fmt: skip


def _run(
    spec: BackendSpec, pixels: RGBImage, image: Path, query: str, config: AgentConfig,
    out_dir: Path, exports: frozenset[ExportFormat], *, resume: bool, sam3_only: bool,
) -> AgentResult:  # fmt: skip
    """The agent (or SAM 3 alone) on the decoded ``pixels``, with a live status line."""
    from sam3_agent.agent.loop import RoundEvent, Sam3Agent
    from sam3_agent.agent.sam3_only import segment_only

    with err_console.status(plain("loading models...")) as status:
        segmenter = spec.build_segmenter()
        if sam3_only:
            status.update(plain(f"segmenting {query!r}..."))
            return segment_only(
                segmenter, pixels, query, config=config, output_dir=out_dir, exports=exports,
                image_path=image,
            )  # fmt: skip
        chat_model = spec.build_chat_model()
        agent = Sam3Agent(segmenter, chat_model, config)
        status.update(plain(f"round 1: asking {chat_model.name}..."))

        def on_round(event: RoundEvent) -> None:
            say(f"round {event.round}: {event.tool or '(no tool)'} - {event.summary}")
            status.update(plain(f"round {event.round + 1}: asking {chat_model.name}..."))

        return agent.run(
            pixels, query, output_dir=out_dir, on_round=on_round, resume=resume, exports=exports,
            image_path=image,
        )  # fmt: skip
