"""Which backends to build, as one picklable value: validate, plan memory, then build.

A :class:`BackendSpec` holds every backend and generation option the CLI flags and
:func:`sam3_agent.segment` take (the same names). Its life has three steps, in this order:

1. :meth:`BackendSpec.validate`: every option and path checked; nothing loaded or imported
   that is heavy (no numpy, torch, openai).
2. :meth:`BackendSpec.plan`: the default MLLM chosen for this machine, and every
   in-process model checked to be loadable (here, cached or on the hub: all missing ones
   named at once) and to fit, from its ``config.json`` (no weight downloaded).
3. :meth:`BackendSpec.build_segmenter` / :meth:`BackendSpec.build_video_segmenter` /
   :meth:`BackendSpec.build_chat_model`.

The spec crosses process boundaries (Ray workers build their models from it), so it holds
plain values only. Error messages name the settings (```llm_timeout```), which are also the
keyword names of ``segment()``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.backends.chat_models import HF_PREFIX, ChatChoice, check_chat_options
from sam3_agent.backends.generation import GenerationSettings, parse_extra_body
from sam3_agent.backends.identity import CHAT, SEGMENTER, chat_description, sam3_description
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL, DEFAULT_VIDEO_CACHE_MB
from sam3_agent.backends.torch_runtime import check_device_name, check_dtype_name
from sam3_agent.values.config import (
    AgentConfig,
    ToolProtocol,
    at_least,
    check_settings,
    positive,
    setting,
)
from sam3_agent.values.errors import UserError, WeightsUnavailableError
from sam3_agent.values.paths import check_cache_file, check_writable_dir

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel, Segmenter, VideoSegmenter
    from sam3_agent.backends.hub import Hub
    from sam3_agent.backends.memory import MemoryReading

logger = logging.getLogger(__name__)

MIB = 1024**2

__all__ = ["BackendSpec", "ModelPlan", "check_cache_file", "check_writable_dir"]


@dataclass(frozen=True)
class BackendSpec:
    """The backend options, as given (docs/cli.md's flag tables say each).

    Attributes:
        sam3: SAM 3 weights in this process: a hub id or a local directory.
        sam3_url, sam3_token: a SAM 3 service instead (``sam3-agent serve-sam3``).
        device, dtype: for in-process models (``auto``: the best this machine has).
        sam3_cache_size: images whose SAM 3 backbone features stay cached, in process.
        video_cache_mb: MiB of SAM 3 backbone features of video frames kept for reuse
            across phrases, in process (0: every phrase recomputes them).
        llm: ``"hf:<hub id or dir>"``: the MLLM in this process.
        llm_url: OpenAI-compatible endpoint(s); several: calls spread and fail over.
        llm_model, llm_api_key, llm_timeout: the model there, its key, seconds per call.
        tool_protocol: ``tags`` or ``native`` tool calls.
        cache, replay: the response cache file; with ``replay`` a miss is an error.
        temperature, max_tokens, seed, llm_extra: generation (``llm_extra``: JSON object).
        memory_check: refuse in-process models that would not fit (:meth:`plan`).
    """

    sam3: str = DEFAULT_SAM3_MODEL
    sam3_url: str | None = setting(
        None,
        lambda url: url.startswith(("http://", "https://")),
        "an http:// or https:// URL",
        optional=True,
    )
    sam3_token: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    sam3_cache_size: int = at_least(8, 1)
    video_cache_mb: int = at_least(DEFAULT_VIDEO_CACHE_MB, 0)
    llm: str | None = None
    llm_url: str | Sequence[str] | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_timeout: float = positive(120.0, "a number of seconds > 0")
    tool_protocol: ToolProtocol = "tags"
    cache: Path | None = None
    replay: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    llm_extra: str | None = None
    memory_check: bool = True

    def __post_init__(self) -> None:
        # A repeatable flag arrives as a list: one URL stays a plain string, several a tuple
        # (hashable and picklable like the rest).
        urls = self.llm_url
        if urls is not None and not isinstance(urls, str):
            urls = tuple(urls)
            object.__setattr__(self, "llm_url", urls[0] if len(urls) == 1 else urls or None)
        if isinstance(self.cache, str):
            object.__setattr__(self, "cache", Path(self.cache))

    # -- 1. validate ---------------------------------------------------------------------

    def generation(self) -> GenerationSettings:
        """The generation options as settings.

        Raises:
            UserError: a value out of range, or ``llm_extra`` that is not a JSON object.
        """
        return GenerationSettings(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
            extra_body=parse_extra_body(self.llm_extra),
        )

    def generation_identity(self) -> dict[str, Any]:
        """The generation options that were given (they change predictions): part of a
        resumable run's identity (``eval``, ``batch``)."""
        settings = self.generation()
        given = {
            "temperature": settings.temperature,
            "max_tokens": settings.max_tokens,
            **settings.key_params(),
        }
        return {k: v for k, v in given.items() if v is not None}

    def validate(self, *, chat: bool = True) -> None:
        """Check every option and path; load and import nothing heavy.

        ``chat=False`` (SAM 3 alone): the MLLM options are still checked for values, but
        not for which backend they select.

        Raises:
            UserError: the first bad option, in one line naming its setting.
        """
        check_device_name(self.device)
        check_dtype_name(self.dtype)
        check_settings(self)
        if self.sam3_url is None and not self.sam3.strip():
            raise UserError("`sam3` must name a hub id or a local directory")
        chat_options = self._chat_options()  # the generation settings checked here too
        if self.cache is not None:
            check_cache_file(self.cache)
        if chat:
            check_chat_options(**chat_options)

    def _chat_options(self) -> dict[str, Any]:
        """The options :func:`check_chat_options` and ``build_chat_model`` both take."""
        return {
            "llm": self.llm,
            "url": self.llm_url,
            "model": self.llm_model,
            "tool_protocol": self.tool_protocol,
            "cache": str(self.cache) if self.cache else None,
            "replay": self.replay,
            "timeout_s": self.llm_timeout,
            "generation": self.generation(),
        }

    def chat_choice(self) -> ChatChoice:
        """Which chat backend the options select (endpoint, in process, or the default).

        Raises:
            UserError: contradictory or malformed MLLM options.
        """
        return check_chat_options(llm=self.llm, url=self.llm_url, model=self.llm_model)

    def model_name(self) -> str | None:
        """The chat model's name as its backend will report it, when the options alone say
        it (``None``: the default MLLM, chosen by :meth:`plan`)."""
        choice = self.chat_choice()
        return None if choice.default else choice.model

    def require_model_name(self, engine: str) -> str | None:
        """:meth:`model_name`; the Ray engine needs it (nothing loads on the driver).

        Raises:
            UserError: ``engine`` is ``ray`` and the options do not name the model.
        """
        name = self.model_name()
        if name is None and engine == "ray":
            raise UserError(
                "`engine='ray'` loads the MLLM on the workers only: name it with `llm_url` and "
                "`llm_model`, or `llm='hf:<id or dir>'`"
            )
        return name

    def check_context(self, config: AgentConfig) -> None:
        """The context policy can be served by the MLLM these options select; loads nothing.

        Raises:
            UserError: ``--context-policy attention`` with an MLLM that is not the
                in-process transformers backend (an endpoint does not report attention).
        """
        if config.context_policy != "attention":
            return
        if self.chat_choice().kind != "hf":
            raise UserError(
                "`context_policy='attention'` needs the in-process transformers MLLM "
                "(`llm='hf:<model>'`); an endpoint does not report attention"
            )

    def describe(self, *, chat: bool = True, resolve: bool = True) -> dict[str, dict[str, Any]]:
        """What the backends these options build will say of themselves
        (:func:`~sam3_agent.backends.base.describe_backend`), from the options alone:
        ``{"mllm": ..., "sam3": ...}`` (no ``mllm`` with ``chat=False``). A resumed session's
        backends are compared with it before any model loads.

        Call it on :meth:`plan`'s spec, which names the default MLLM. ``resolve=False``
        imports nothing heavy: what only the machine tells (what ``--dtype auto`` means here,
        the default MLLM not planned yet) is left out, to be compared once known.

        Raises:
            UserError: malformed options (see :meth:`validate`).
        """
        choice = self.chat_choice() if chat else None
        in_process = choice is not None and choice.kind == "hf"
        # Only an in-process model has a dtype (resolving "auto" imports torch).
        needs_dtype = in_process or self.sam3_url is None
        dtype = self._dtype_name(resolve) if needs_dtype else None
        parts = {
            SEGMENTER: sam3_description(url=self.sam3_url)
            if self.sam3_url is not None
            else sam3_description(model=self.sam3, dtype=dtype)
        }
        if choice is not None:
            generation = self.generation()
            temperature, max_tokens = generation.resolved(in_process=in_process)
            description = chat_description(
                model=choice.model,
                in_process=in_process,
                temperature=temperature,
                max_tokens=max_tokens,
                generation=generation,
                dtype=dtype if in_process else None,
            )
            if choice.default:  # which model is for plan() to say
                del description["--llm"], description["--llm-model"]
            parts[CHAT] = description
        return parts

    def _dtype_name(self, resolve: bool) -> str | None:
        """``--dtype`` as the in-process models load it; ``None`` for ``auto`` unresolved."""
        if self.dtype != "auto":
            return self.dtype
        if not resolve:
            return None
        from sam3_agent.backends.torch_runtime import auto_dtype_name, resolve_device

        return auto_dtype_name(resolve_device(self.device).type)

    # -- 2. plan ---------------------------------------------------------------------------

    def plan(
        self,
        *,
        chat: bool = True,
        video: bool = False,
        reading: MemoryReading | None = None,
        hub: Hub | None = None,
    ) -> ModelPlan:
        """Choose the default MLLM for this machine, check that every in-process model can
        be loaded (a local directory, the cache, or the hub) and that they fit (unless
        ``memory_check`` is off), before any weight is downloaded. Only an unknown hub id's
        ``config.json`` is fetched (a few KB) for the estimate.

        ``chat``: an MLLM is needed; ``video``: SAM 3's video model with its feature cache
        counted; ``reading``: the device's memory (read if ``None``); ``hub``: where to ask
        about models not here (:class:`~.hub.HfHub` by default).

        Raises:
            UserError: the models would not fit (refused first: one line with the numbers
                and the ways out), or CUDA was asked for where there is none.
            WeightsUnavailableError: every model that cannot be loaded, in one line; it
                carries the default MLLM's note in ``notes``.
        """
        from sam3_agent.backends import hub as hubs
        from sam3_agent.backends import memory
        from sam3_agent.backends.torch_runtime import auto_dtype_name, resolve_device

        choice = self.chat_choice() if chat else None
        mllm_here = choice is not None and choice.kind == "hf"
        sam3_here = self.sam3_url is None
        if not (mllm_here or sam3_here):
            return ModelPlan(self)
        device = resolve_device(self.device)
        dtype = auto_dtype_name(device.type) if self.dtype == "auto" else self.dtype
        reading = reading or memory.read_memory(device)
        hub = hub or hubs.HfHub()
        footprints, located = [], []
        if sam3_here:
            sam3_at = hubs.locate([hubs.ModelRef(self.sam3, "SAM 3", "`sam3='DIR'`")], hub)
            if video:
                cache = self.video_cache_mb * MIB
                sam3 = memory.footprint(
                    self.sam3, "sam3_video", dtype, sam3_at[0].config, extra=cache
                )
            else:
                sam3 = memory.footprint(self.sam3, "sam3", dtype, sam3_at[0].config)
            footprints += [sam3] if sam3 else []
            located += sam3_at
        spec, note = self, None
        if mllm_here and choice is not None:
            model = choice.model
            if choice.default:
                default = memory.choose_default_mllm(reading, dtype, footprints)
                model = default.model
                note = (
                    f"MLLM: {model} in {dtype}, in this process ({default.reason}); "
                    "choose another with `llm='hf:ID'` or `llm_url`"
                )
                spec = replace(self, llm=f"{HF_PREFIX}{model}")
            mllm_at = hubs.locate([hubs.ModelRef(model, "the MLLM", "`llm='hf:DIR'`")], hub)
            mllm = memory.footprint(model, "mllm", dtype, mllm_at[0].config)
            footprints += [mllm] if mllm else []
            located += mllm_at
        if self.memory_check:  # its refusal names the chosen model itself
            ways = memory.ways_out(mllm_here, sam3_here, dtype, device.type)
            memory.check_fits(footprints, reading, ways)
        try:
            hubs.check_located(located)
        except WeightsUnavailableError as e:
            if note is not None:  # which model was chosen, and why, is news all the same
                e.notes = (*e.notes, note)
            raise
        return ModelPlan(spec, note)

    # -- 3. build ---------------------------------------------------------------------------

    def build_segmenter(self) -> Segmenter:
        """SAM 3 in this process, or the client of the service at ``sam3_url``.

        Raises:
            WeightsUnavailableError: in-process weights missing, gated or offline.
        """
        from sam3_agent.backends.segmenters import build_segmenter

        return build_segmenter(**self._sam3_options(), cache_size=self.sam3_cache_size)

    def build_video_segmenter(self) -> VideoSegmenter:
        """SAM 3's video model in this process (the same ``sam3`` weights), or the client
        of the service at ``sam3_url`` (started with ``serve-sam3 --video``); raises as
        :meth:`build_segmenter` does."""
        from sam3_agent.backends.segmenters import build_video_segmenter

        return build_video_segmenter(**self._sam3_options(), cache_bytes=self.video_cache_mb * MIB)

    def _sam3_options(self) -> dict[str, Any]:
        return {
            "model": self.sam3,
            "url": self.sam3_url,
            "token": self.sam3_token,
            "device": self.device,
            "dtype": self.dtype,
        }

    def build_chat_model(self) -> ChatModel:
        """The MLLM these options select; the default one is chosen by :meth:`plan` first
        (so the memory check and the choice see SAM 3 beside it), unless planned already.

        Raises:
            UserError: contradictory options, or models that do not fit.
            WeightsUnavailableError: the in-process model's weights cannot be loaded.
        """
        from sam3_agent.backends.chat_models import build_chat_model

        spec = self
        if self.chat_choice().default:
            plan = self.plan()
            logger.warning("%s", plan.note)
            spec = plan.spec
        return build_chat_model(
            **spec._chat_options(), api_key=spec.llm_api_key, device=spec.device, dtype=spec.dtype
        )


@dataclass(frozen=True)
class ModelPlan:
    """What :meth:`BackendSpec.plan` decided.

    Attributes:
        spec: the options to build with (a default MLLM made explicit as ``llm``).
        note: one line for the user: which default MLLM and why (``None``: none chosen).
    """

    spec: BackendSpec
    note: str | None = None
