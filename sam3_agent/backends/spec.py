"""Which backends to build, as one picklable value (Ray workers build from it): ``validate``
(nothing heavy imported), ``plan`` (the default MLLM chosen, every in-process model checked
to load and fit, no weight downloaded), then ``build_*``. Messages name the settings."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.backends import hub as hubs
from sam3_agent.backends import memory
from sam3_agent.backends.chat_models import HF_PREFIX, ChatChoice, check_chat_options
from sam3_agent.backends.generation import GenerationSettings, parse_extra_body
from sam3_agent.backends.identity import CHAT, SEGMENTER, chat_description, sam3_description
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL, DEFAULT_VIDEO_CACHE_MB
from sam3_agent.backends.torch_runtime import (
    auto_dtype_name,
    check_device_name,
    check_dtype_name,
    resolve_device,
)
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

logger = logging.getLogger(__name__)

MIB = 1024**2

__all__ = ["BackendSpec", "ModelPlan", "check_writable_dir"]


@dataclass(frozen=True)
class BackendSpec:
    """The backend options, as given (docs/cli.md's flag tables say each)."""

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

    def generation(self) -> GenerationSettings:
        return GenerationSettings(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
            extra_body=parse_extra_body(self.llm_extra),
        )

    def generation_identity(self) -> dict[str, Any]:
        """The generation options given: part of a resumable run's identity."""
        settings = self.generation()
        given = {
            "temperature": settings.temperature,
            "max_tokens": settings.max_tokens,
            **settings.key_params(),
        }
        return {k: v for k, v in given.items() if v is not None}

    def validate(self, *, chat: bool = True) -> None:
        """Raise UserError for the first bad option. ``chat=False``: the MLLM options are
        checked for values, not for which backend they select."""
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
        return check_chat_options(llm=self.llm, url=self.llm_url, model=self.llm_model)

    def model_name(self) -> str | None:
        """The chat model's name as its backend will report it, when the options alone say
        it (``None``: the default MLLM, chosen by :meth:`plan`)."""
        choice = self.chat_choice()
        return None if choice.default else choice.model

    def require_model_name(self, engine: str) -> str | None:
        """:meth:`model_name`, required with the Ray engine (nothing loads on the driver)."""
        name = self.model_name()
        if name is None and engine == "ray":
            raise UserError(
                "`engine='ray'` loads the MLLM on the workers only: name it with `llm_url` and "
                "`llm_model`, or `llm='hf:<id or dir>'`"
            )
        return name

    def check_context(self, config: AgentConfig) -> None:
        """Raise UserError when the MLLM selected cannot serve the context policy."""
        if config.context_policy != "attention":
            return
        if self.chat_choice().kind != "hf":
            raise UserError(
                "`context_policy='attention'` needs the in-process transformers MLLM "
                "(`llm='hf:<model>'`); an endpoint does not report attention"
            )

    def describe(self, *, chat: bool = True, resolve: bool = True) -> dict[str, dict[str, Any]]:
        """What :meth:`plan`'s spec's backends will describe themselves as (a resumed
        session's are compared with it). ``resolve=False`` imports nothing heavy and leaves
        out what only the machine tells (``auto`` dtype, the default MLLM)."""
        choice = self.chat_choice() if chat else None
        in_process = choice is not None and choice.kind == "hf"
        # Only an in-process model has a dtype (resolving "auto" imports torch).
        needs_dtype = in_process or self.sam3_url is None
        dtype = self._dtype_name(resolve) if needs_dtype else None
        parts = {SEGMENTER: sam3_description(model=self.sam3, url=self.sam3_url, dtype=dtype)}
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
        if self.dtype != "auto":
            return self.dtype
        if not resolve:
            return None
        return auto_dtype_name(resolve_device(self.device).type)

    def plan(
        self,
        *,
        chat: bool = True,
        video: bool = False,
        reading: memory.MemoryReading | None = None,
        hub: hubs.Hub | None = None,
    ) -> ModelPlan:
        """Choose the default MLLM for this machine and check that every in-process model
        fits (UserError, first) and can be loaded (WeightsUnavailableError naming each, with
        the default's note); only an unknown hub id's ``config.json`` is fetched."""
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
            sam3_at = hubs.locate(hubs.ModelRef(self.sam3, "SAM 3", "`sam3='DIR'`"), hub)
            kind: memory.Kind = "sam3_video" if video else "sam3"
            cache = self.video_cache_mb * MIB if video else 0  # the video model's features
            sam3 = memory.footprint(self.sam3, kind, dtype, sam3_at.config, extra=cache)
            footprints += [sam3] if sam3 else []
            located.append(sam3_at)
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
            mllm_at = hubs.locate(hubs.ModelRef(model, "the MLLM", "`llm='hf:DIR'`"), hub)
            mllm = memory.footprint(model, "mllm", dtype, mllm_at.config)
            footprints += [mllm] if mllm else []
            located.append(mllm_at)
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

    def build_segmenter(self) -> Segmenter:
        from sam3_agent.backends.segmenters import build_segmenter

        return build_segmenter(**self._sam3_options(), cache_size=self.sam3_cache_size)

    def build_video_segmenter(self) -> VideoSegmenter:
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
        """The MLLM selected; a default one is chosen by :meth:`plan` first, so the memory
        check sees SAM 3 beside it."""
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
    """``spec`` with a default MLLM made explicit as ``llm``; ``note``: which and why."""

    spec: BackendSpec
    note: str | None = None
