"""One request, image or video, from its settings to its run directory (``run``, ``track``),
all that can be refused checked before any model loads or anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from sam3_agent.agent.checkpoint import Committed, check_resumable
from sam3_agent.agent.ended import finish_ended
from sam3_agent.agent.events import RoundCallback, RoundEvent
from sam3_agent.agent.loop import Sam3Agent, check_query
from sam3_agent.agent.prompts import load_prompt_set
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.rundir import parse_exports, result_document
from sam3_agent.agent.sam3_only import segment_only
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.backends.base import ChatModel
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB, downloads, shown, url_of
from sam3_agent.media.video import open_video
from sam3_agent.runs.rundirs import Output
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.files import safe_name
from sam3_agent.values.images import RGBImage, load_image

R = TypeVar("R", AgentResult, VideoResult)


class Progress(Protocol):
    """What a request tells its caller while it runs."""

    def note(self, line: str) -> None:
        """A line worth keeping (settings named in backticks, as ``UserError`` names them)."""

    def status(self, line: str) -> None:
        """What is happening now; it replaces the last status."""

    def round(self, event: RoundEvent) -> None:
        """A main round ended."""


@dataclass(frozen=True)
class Finished(Generic[R]):
    """A request's session, ended: its result, its run directory and ``result.json``."""

    result: R
    directory: Path
    document: dict[str, Any]


def segment_request(
    spec: BackendSpec, image: Path | str, query: str, config: AgentConfig, output: Output,
    progress: Progress, *, sam3_only: bool = False, export: str | None = None,
    max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
) -> Finished[AgentResult]:  # fmt: skip
    """Segment what ``query`` describes in ``image`` (a file or an http(s) URL) with the agent
    (or SAM 3 alone), or continue the session in ``output.resume``."""
    with downloads(max_download_mb) as fetched:
        _check(spec, config, output, chat=not sam3_only)
        formats = parse_exports(export)
        check_query(query)
        if url_of(image) is not None:
            progress.status(f"fetching {shown(str(url_of(image)))}...")
        local, download = fetched.resolve(image, "image")
        path = Path(local)
        shown_as: Path | str = path if download is None else download.url
        downloaded = None if download is None else download.record()
        stem = path.stem if download is None else download.stem
        pixels = load_image(path, max_pixels=config.max_image_pixels)
        resume, found = output.resume, None
        if resume is not None:  # everything the run directory can refuse, before any model
            found = _check_resume(resume, spec, query, pixels, config, planned=False)
            if not found.backends_recorded:
                progress.note(
                    f"{resume} was saved by an earlier version, which did not record its models "
                    "and generation settings: they are not compared"
                )
            if found.ended:  # nothing left to ask: the committed ending, its outputs written again
                progress.note(
                    f"the session in {resume} ended after round {found.round}: no model to load"
                )
                result = finish_ended(
                    resume, pixels, query, config=config, image_path=shown_as, exports=formats,
                    downloaded=downloaded,
                )  # fmt: skip
                return Finished(result, resume, result_document(result, formats))
        # Which default MLLM, and do the models fit: before any download, any directory.
        plan = spec.plan(chat=not sam3_only)
        if plan.note:
            progress.note(plan.note)
        if resume is not None and found is not None:
            _check_resume(resume, plan.spec, query, pixels, config, planned=True)
            progress.note(f"resuming {resume} after round {found.round}")
        # Only now is anything written: a bad image leaves no output directory behind.
        with output.claimed(safe_name(f"{stem}-{query}", max_len=64)) as out_dir:
            progress.status("loading models...")
            segmenter = plan.spec.build_segmenter()
            if sam3_only:
                progress.status(f"segmenting {query!r}...")
                result = segment_only(
                    segmenter, pixels, query, config=config, output_dir=out_dir, exports=formats,
                    image_path=shown_as, downloaded=downloaded,
                )  # fmt: skip
            else:
                chat_model = plan.spec.build_chat_model()
                agent = Sam3Agent(segmenter, chat_model, config)
                # The decoded pixels go on (one decode); the run writes result.json once.
                result = agent.run(
                    pixels, query, output_dir=out_dir, on_round=_rounds(progress, chat_model),
                    resume=resume is not None, exports=formats, image_path=shown_as,
                    downloaded=downloaded,
                )  # fmt: skip
        return Finished(result, out_dir, result_document(result, formats))


def track_request(
    spec: BackendSpec, video: Path | str, query: str, config: AgentConfig, output: Output,
    progress: Progress, *, selection: FrameSelection, options: VideoOptions,
    max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
) -> Finished[VideoResult]:  # fmt: skip
    """Track what ``query`` describes through the frames ``selection`` picks of ``video`` (a
    file, a frame folder or an http(s) URL), or continue the session in ``output.resume``."""
    with downloads(max_download_mb) as fetched:
        _check(spec, config, output, chat=True)
        check_query(query)
        if url_of(video) is not None:
            progress.status(f"fetching {shown(str(url_of(video)))}...")
        local, download = fetched.resolve(video, "video")
        path = Path(local)
        # Opening indexes the frames (no pixel kept): a bad video fails here, in one line.
        source = open_video(path, selection, max_pixels=config.max_image_pixels)
        named = path if download is None else shown(download.url)
        if source.note:
            progress.note(f"{named}: {source.note}")
        progress.note(f"{named}: tracking {source.frame_count} of {source.source_frames} frames")
        stem = path.stem if download is None else download.stem
        plan = spec.plan(video=True)
        if plan.note:
            progress.note(plan.note)
        with output.claimed(safe_name(f"{stem}-{query}", max_len=64)) as out_dir:
            progress.status("loading models...")
            segmenter = plan.spec.build_video_segmenter()
            chat_model = plan.spec.build_chat_model()
            agent = Sam3VideoAgent(segmenter, chat_model, config, options, selection)
            result = agent.run(
                source, query, output_dir=out_dir, on_round=_rounds(progress, chat_model),
                resume=output.resume is not None,
                downloaded=None if download is None else download.record(),
            )  # fmt: skip
        return Finished(result, out_dir, result.to_json())


def _check(spec: BackendSpec, config: AgentConfig, output: Output, *, chat: bool) -> None:
    """The settings, the context policy against the MLLM (with ``chat``), the prompt set and
    the run directory, before anything is decoded or loaded."""
    spec.validate(chat=chat)
    if chat:
        spec.check_context(config)
    load_prompt_set(config.prompts_dir)
    output.check(agent=chat)


def _rounds(progress: Progress, chat_model: ChatModel) -> RoundCallback:
    """The ``on_round`` callback: each round told, then the model asked again."""
    progress.status(f"round 1: asking {chat_model.name}...")

    def on_round(event: RoundEvent) -> None:
        progress.round(event)
        progress.status(f"round {event.round + 1}: asking {chat_model.name}...")

    return on_round


def _check_resume(
    directory: Path, spec: BackendSpec, query: str, pixels: RGBImage, config: AgentConfig,
    *, planned: bool,
) -> Committed:  # fmt: skip
    """:func:`check_resumable` with what the settings say of the models; ``planned``: after
    :meth:`BackendSpec.plan`, with the default MLLM and what ``dtype='auto'`` means here."""
    return check_resumable(
        directory, query=query, image=pixels, config=config,
        model=spec.model_name(), backends=spec.describe(resolve=planned),
    )  # fmt: skip
