"""One call that builds the backends and runs one session: :func:`segment`, :func:`track`.
For many requests build a :class:`~sam3_agent.agent.loop.Sam3Agent` once instead."""

from __future__ import annotations

import difflib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB, downloads
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import ImageInput

_SPEC_NAMES = frozenset(f.name for f in fields(BackendSpec))


def segment(
    image: ImageInput,
    query: str,
    *,
    output_dir: str | Path | None = None,
    config: AgentConfig | None = None,
    backends: BackendSpec | None = None,
    max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
    **options: Any,
) -> AgentResult:
    """Segment what ``query`` describes in ``image`` (a path, array or ``http(s)://`` URL)
    with the backends of ``backends=`` or of :class:`BackendSpec` fields given as keywords
    (named as the CLI flags are: ``--llm-url`` is ``llm_url``), which replace its fields.

    Every option is checked, and the models checked to fit in memory, before anything loads;
    a URL is fetched first (at most ``max_download_mb``) and ``result.json`` records it.
    """
    spec, config = _planned("segment", config, backends, options, video=False)
    with downloads(max_download_mb) as fetched:
        local, download = fetched.resolve(image, "image")
        agent = Sam3Agent(spec.build_segmenter(), spec.build_chat_model(), config)
        if download is None:
            return agent.run(image, query, output_dir=output_dir)
        return agent.run(
            local, query, output_dir=output_dir, image_path=download.url,
            downloaded=download.record(),
        )  # fmt: skip


def track(
    video: str | Path,
    query: str,
    *,
    output_dir: str | Path | None = None,
    config: AgentConfig | None = None,
    options: VideoOptions | None = None,
    selection: FrameSelection | None = None,
    backends: BackendSpec | None = None,
    max_download_mb: int = DEFAULT_MAX_DOWNLOAD_MB,
    **backend_options: Any,
) -> VideoResult:
    """:func:`segment` for ``video`` (a video file, a folder of frames or a URL), with the
    same keywords; ``options``: what the model is shown; ``selection``: which frames are tracked.
    """
    spec, config = _planned("track", config, backends, backend_options, video=True)
    with downloads(max_download_mb) as fetched:
        local, download = fetched.resolve(video, "video")
        agent = Sam3VideoAgent(
            spec.build_video_segmenter(), spec.build_chat_model(), config, options, selection
        )
        record = None if download is None else download.record()
        return agent.run(local, query, output_dir=output_dir, downloaded=record)


def _planned(
    caller: str,
    config: AgentConfig | None,
    backends: BackendSpec | None,
    options: dict[str, Any],
    *,
    video: bool,
) -> tuple[BackendSpec, AgentConfig]:
    """The spec validated and planned, and the config with the spec's tool protocol."""
    unknown = sorted(set(options) - _SPEC_NAMES)
    if unknown:
        raise UserError(_unknown_options(caller, unknown, video=video))
    config = config or AgentConfig()
    if backends is None:
        options.setdefault("tool_protocol", config.tool_protocol)
    spec = replace(backends or BackendSpec(), **options)
    spec.validate()
    spec.check_context(config)
    spec = spec.plan(video=video).spec
    if config.tool_protocol != spec.tool_protocol:
        config = replace(config, tool_protocol=spec.tool_protocol)
    return spec, config


def _unknown_options(caller: str, unknown: list[str], *, video: bool) -> str:
    """One line naming each keyword that is no ``BackendSpec`` field: the value it belongs
    to (``config=AgentConfig(...)``, ...), else the closest name."""
    homes: list[tuple[str, type]] = [("config", AgentConfig)]
    if video:
        homes += [("options", VideoOptions), ("selection", FrameSelection)]
    owner = {f.name: (arg, kind.__name__) for arg, kind in reversed(homes) for f in fields(kind)}
    spelled = {name: f"{arg}={kind}({name}=...)" for name, (arg, kind) in owner.items()}
    kinds = [kind.__name__ for _, kind in homes]
    fields_of = ", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else kinds[0]
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(_SPEC_NAMES | set(owner)), n=1)
        hint = f" (did you mean {spelled.get(close[0], close[0])}?)" if close else ""
        neither = f"neither a backend option (BackendSpec) nor a field of {fields_of}{hint}"
        said.append(
            f"{name} is a field of {owner[name][1]}, not a backend option: pass {spelled[name]}"
            if name in owner
            else f"{name} is {neither}"
        )
    return f"{caller}() got unknown option{'s' if len(unknown) > 1 else ''}: " + "; ".join(said)
