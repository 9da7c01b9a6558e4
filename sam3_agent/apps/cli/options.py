"""Option types shared by the commands, the one validation step, and the backends built.

Each command declares ``sam3: Sam3ModelOpt = DEFAULT_SAM3_MODEL`` etc., gathers them in a
:class:`BackendOptions`, calls :meth:`BackendOptions.validate` (every flag and path checked,
nothing loaded), and only then :meth:`BackendOptions.build_segmenter` /
:meth:`BackendOptions.build_chat_model`. So ``run`` and ``eval`` take exactly the same
backend flags, and a bad one is refused in one line before any model loads.

This module imports nothing heavy (no numpy, torch, openai): ``--help`` stays instant.
One option per block: a new flag is one new block.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sam3_agent.backends.chat_models import check_chat_options
from sam3_agent.backends.generation import GenerationSettings, parse_extra_body
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.backends.torch_runtime import DTYPE_NAMES, check_device_name, check_dtype_name
from sam3_agent.values.config import CONTEXT_POLICIES, DEFAULT_MAX_PIXELS, AgentConfig, ToolProtocol
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel, Segmenter
    from sam3_agent.backends.memory import MemoryReading

BACKENDS = "Backends"
AGENT = "Agent"

Sam3ModelOpt = Annotated[
    str,
    typer.Option(
        "--sam3",
        help="SAM 3 weights: a Hugging Face hub id (gated: accept the licence, set HF_TOKEN) "
        "or a local directory.",
        rich_help_panel=BACKENDS,
    ),
]
Sam3UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--sam3-url",
        help="Use a SAM 3 service (`sam3-agent serve-sam3`) at this URL instead of loading "
        "SAM 3 in this process.",
        rich_help_panel=BACKENDS,
    ),
]
Sam3TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--sam3-token",
        envvar="SAM3_AGENT_TOKEN",
        help="Bearer token for the SAM 3 service.",
        rich_help_panel=BACKENDS,
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        help="Device for in-process models: auto, cpu, cuda, cuda:1.", rich_help_panel=BACKENDS
    ),
]
DtypeOpt = Annotated[
    str,
    typer.Option(
        help="dtype for in-process models: auto (bfloat16 on CUDA, and on a CPU that computes "
        "it natively; else float32), " + ", ".join(DTYPE_NAMES[1:]) + ".",
        rich_help_panel=BACKENDS,
    ),
]
LlmOpt = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help="In-process MLLM: 'hf:<hub id or local dir>'. Used when no --llm-url is given.",
        rich_help_panel=BACKENDS,
    ),
]
LlmUrlOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--llm-url",
        help="OpenAI-compatible endpoint (vLLM, hosted API), e.g. http://localhost:8000/v1. "
        "Repeat for several servers of the same model: calls are spread over them and fail "
        "over when one is down. Default: OPENAI_BASE_URL when set and --llm is not given.",
        rich_help_panel=BACKENDS,
    ),
]
LlmModelOpt = Annotated[
    str | None,
    typer.Option("--llm-model", help="Model name at the endpoint.", rich_help_panel=BACKENDS),
]
LlmApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-api-key",
        envvar="OPENAI_API_KEY",
        help="API key for the endpoint.",
        rich_help_panel=BACKENDS,
    ),
]
LlmTimeoutOpt = Annotated[
    float,
    typer.Option("--llm-timeout", help="Seconds per MLLM request.", rich_help_panel=BACKENDS),
]
ToolProtocolOpt = Annotated[
    ToolProtocol,
    typer.Option(
        "--tool-protocol",
        help="tags: tool calls as <tool>{json}</tool> in the reply; native: the API's "
        "structured tool calls.",
        rich_help_panel=BACKENDS,
    ),
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        help="SQLite file caching MLLM responses; identical requests cost no tokens.",
        rich_help_panel=BACKENDS,
    ),
]
ReplayOpt = Annotated[
    bool,
    typer.Option(
        "--replay",
        help="With --cache: a request not in the cache is an error (deterministic reruns).",
        rich_help_panel=BACKENDS,
    ),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        help="MLLM sampling temperature, 0..2 (default: 0, greedy).",
        rich_help_panel=BACKENDS,
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        help="Completion tokens per MLLM request (default: 4096 at an endpoint, 2048 "
        "in-process); reasoning models may need more.",
        rich_help_panel=BACKENDS,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", help="MLLM sampling seed (endpoints that honour it).", rich_help_panel=BACKENDS
    ),
]
LlmExtraOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-extra",
        help="JSON object merged into each request body, e.g. "
        '\'{"chat_template_kwargs": {"enable_thinking": true}}\'; in-process only '
        "chat_template_kwargs is read.",
        rich_help_panel=BACKENDS,
    ),
]
MemoryCheckOpt = Annotated[
    bool,
    typer.Option(
        "--memory-check/--no-memory-check",
        help="Before loading in-process models, refuse those that would not fit in the "
        "memory available (estimated from their config.json).",
        rich_help_panel=BACKENDS,
    ),
]
MaxRoundsOpt = Annotated[
    int,
    typer.Option("--max-rounds", help="Main MLLM calls per session.", rich_help_panel=AGENT),
]
MaxCorrectionsOpt = Annotated[
    int,
    typer.Option(
        "--max-corrections",
        help="Model mistakes corrected per session before it fails.",
        rich_help_panel=AGENT,
    ),
]
CheckConcurrencyOpt = Annotated[
    int,
    typer.Option(
        "--check-concurrency", help="Mask checks run at the same time.", rich_help_panel=AGENT
    ),
]
ScoreThresholdOpt = Annotated[
    float,
    typer.Option("--score-threshold", help="SAM 3 score threshold.", rich_help_panel=AGENT),
]
MaxImageSideOpt = Annotated[
    int,
    typer.Option(
        "--max-image-side",
        help="Longer side of images sent to the MLLM, in pixels.",
        rich_help_panel=AGENT,
    ),
]
MaxPixelsOpt = Annotated[
    int,
    typer.Option(
        "--max-pixels",
        help="Largest input image, in width x height pixels (checked before decoding).",
        rich_help_panel=AGENT,
    ),
]

PromptsOpt = Annotated[
    Path | None,
    typer.Option(
        "--prompts",
        help="A directory holding another prompt set (the templates of prompts/); checked "
        "before any model loads. Default: the prompt set shipped with sam3-agent.",
        rich_help_panel=AGENT,
    ),
]


MIN_IMAGE_SIDE = 128
"""The smallest ``--max-image-side``: below it the numbered labels and the zoom-in view of
the mask checks (at least 96 pixels, ``render.ZOOM_MIN_SIDE``) no longer fit legibly."""


@dataclass(frozen=True)
class BackendOptions:
    """The backend flags of a command, as given."""

    sam3: str = DEFAULT_SAM3_MODEL
    sam3_url: str | None = None
    sam3_token: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    llm: str | None = None
    llm_url: str | Sequence[str] | None = None  # several: spread and fail over
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_timeout: float = 120.0
    tool_protocol: ToolProtocol = "tags"
    cache: Path | None = None
    replay: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    llm_extra: str | None = None

    def __post_init__(self) -> None:
        # A repeatable flag arrives as a list: one URL stays a plain string, several a tuple.
        urls = self.llm_url
        if urls is not None and not isinstance(urls, str):
            urls = tuple(urls)
            object.__setattr__(self, "llm_url", urls[0] if len(urls) == 1 else urls or None)

    def generation(self) -> GenerationSettings:
        """The generation flags as settings.

        Raises:
            UserError: a value out of range, or ``--llm-extra`` that is not a JSON object.
        """
        return GenerationSettings(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
            extra_body=parse_extra_body(self.llm_extra),
        )

    def generation_identity(self) -> dict[str, Any]:
        """The generation flags that were given (they change predictions): part of a
        resumable run's identity (``eval``, ``batch``)."""
        settings = self.generation()
        given = {
            "temperature": settings.temperature,
            "max_tokens": settings.max_tokens,
            **settings.key_params(),
        }
        return {k: v for k, v in given.items() if v is not None}

    def validate(self, *, chat: bool = True) -> None:
        """Check every flag and path; load and import nothing heavy.

        ``chat=False`` (SAM 3 alone): the MLLM flags are still checked for values, but
        not for which backend they select.

        Raises:
            UserError: the first bad flag, in one line naming it.
        """
        check_device_name(self.device)
        check_dtype_name(self.dtype)
        if self.sam3_url is not None and not self.sam3_url.startswith(("http://", "https://")):
            raise UserError(f"--sam3-url must be an http:// or https:// URL, got {self.sam3_url!r}")
        if self.sam3_url is None and not self.sam3.strip():
            raise UserError("--sam3 must name a hub id or a local directory")
        if not (math.isfinite(self.llm_timeout) and self.llm_timeout > 0):
            raise UserError(
                f"--llm-timeout must be a number of seconds > 0, got {self.llm_timeout}"
            )
        generation = self.generation()
        if self.cache is not None:
            check_cache_file(self.cache)
        if chat:
            check_chat_options(
                llm=self.llm,
                url=self.llm_url,
                model=self.llm_model,
                tool_protocol=self.tool_protocol,
                cache=str(self.cache) if self.cache else None,
                replay=self.replay,
                timeout_s=self.llm_timeout,
                generation=generation,
            )

    def build_segmenter(self) -> Segmenter:
        from sam3_agent.backends.segmenters import build_segmenter

        return build_segmenter(
            model=self.sam3,
            url=self.sam3_url,
            token=self.sam3_token,
            device=self.device,
            dtype=self.dtype,
        )

    def build_chat_model(self) -> ChatModel:
        from sam3_agent.backends.chat_models import build_chat_model

        return build_chat_model(
            llm=self.llm,
            url=self.llm_url,
            model=self.llm_model,
            api_key=self.llm_api_key,
            tool_protocol=self.tool_protocol,
            cache=str(self.cache) if self.cache else None,
            replay=self.replay,
            timeout_s=self.llm_timeout,
            device=self.device,
            dtype=self.dtype,
            generation=self.generation(),
        )


@dataclass(frozen=True)
class ModelPlan:
    """What :func:`plan_models` decided.

    Attributes:
        backends: the options to build with (a default MLLM made explicit as ``llm``).
        note: one line for the user: which default MLLM and why (``None``: none chosen).
    """

    backends: BackendOptions
    note: str | None = None


def plan_models(
    backends: BackendOptions,
    *,
    chat: bool = True,
    memory_check: bool = True,
    reading: MemoryReading | None = None,
) -> ModelPlan:
    """Choose the default MLLM for this machine and check that the in-process models fit,
    before any weight is downloaded (see :mod:`sam3_agent.backends.memory`).

    Args:
        backends: validated options (:meth:`BackendOptions.validate`).
        chat: whether an MLLM is needed (not for SAM 3 alone).
        memory_check: refuse models that would not fit; ``False`` only estimates.
        reading: the device's memory (tests pass a fake one); read from the device if
            ``None``.

    Raises:
        UserError: the models would not fit (one line: the numbers and the ways out), or
            CUDA was asked for where there is none.
    """
    from sam3_agent.backends import memory
    from sam3_agent.backends.torch_runtime import auto_dtype_name, resolve_device

    choice = None
    if chat:
        choice = check_chat_options(
            llm=backends.llm, url=backends.llm_url, model=backends.llm_model
        )
    mllm_here = choice is not None and choice.kind == "hf"
    sam3_here = backends.sam3_url is None
    if not (mllm_here or sam3_here):
        return ModelPlan(backends)
    device = resolve_device(backends.device)
    dtype = auto_dtype_name(device.type) if backends.dtype == "auto" else backends.dtype
    reading = reading or memory.read_memory(device)
    footprints = []
    if sam3_here:
        sam3 = memory.footprint(backends.sam3, "sam3", dtype)
        footprints += [sam3] if sam3 else []
    note = None
    if mllm_here and choice is not None:
        model = choice.model
        if choice.default:
            default = memory.choose_default_mllm(reading, dtype, footprints)
            model = default.model
            note = (
                f"MLLM: {model} in {dtype}, in this process ({default.reason}); "
                "choose another with --llm hf:ID or --llm-url"
            )
            backends = replace(backends, llm=f"hf:{model}")
        mllm = memory.footprint(model, "mllm", dtype)
        footprints += [mllm] if mllm else []
    if memory_check:
        ways_out = _ways_out(mllm_here, sam3_here, dtype, device.type)
        memory.check_fits(footprints, reading, ways_out)
    return ModelPlan(backends, note)


def _ways_out(mllm_here: bool, sam3_here: bool, dtype: str, device_type: str) -> str:
    ways = []
    if mllm_here:
        ways += [
            "an OpenAI-compatible server (--llm-url URL --llm-model NAME)",
            f"a smaller --llm hf:{_smallest_default()}",
        ]
    if sam3_here:
        ways.append("a SAM 3 service (--sam3-url)")
    if dtype == "float32":
        slower = ", slower on this CPU" if device_type == "cpu" else ""
        ways.append(f"--dtype bfloat16 (half the memory{slower})")
    ways.append("--no-memory-check if the estimate is wrong")
    return "ways out: " + ", ".join(ways)


def _smallest_default() -> str:
    from sam3_agent.backends.memory import SMALL_DEFAULT_MLLMS

    return SMALL_DEFAULT_MLLMS[-1]


def config_from_flags(
    *,
    max_rounds: int,
    max_corrections: int,
    check_concurrency: int,
    score_threshold: float,
    max_image_side: int,
    tool_protocol: ToolProtocol,
    prompts_dir: Path | None = None,
    context_policy: str = AgentConfig.context_policy,
    max_context_tokens: int = AgentConfig.max_context_tokens,
    max_image_pixels: int = DEFAULT_MAX_PIXELS,
) -> AgentConfig:
    """The :class:`AgentConfig` for the agent flags every command shares.

    Raises:
        UserError: a value out of range (NaN included), named by its flag, or a prompt set
            that cannot be used.
    """
    if max_image_side < MIN_IMAGE_SIDE:
        raise UserError(
            f"--max-image-side must be >= {MIN_IMAGE_SIDE} (room for the numbered masks and "
            f"the zoomed views), got {max_image_side}"
        )
    try:
        config = AgentConfig(
            max_rounds=max_rounds,
            max_corrections=max_corrections,
            check_concurrency=check_concurrency,
            score_threshold=score_threshold,
            max_image_side=max_image_side,
            tool_protocol=tool_protocol,
            prompts_dir=prompts_dir,
            context_policy=context_policy,
            max_context_tokens=max_context_tokens,
            max_image_pixels=max_image_pixels,
        )
    except UserError as e:
        # AgentConfig names its fields; the user typed flags.
        text = str(e)
        field = text.split(" ", 1)[0]
        raise UserError(f"--{field.replace('_', '-')} {text.split(' ', 1)[1]}") from e
    from sam3_agent.agent.prompts import load_prompt_set

    load_prompt_set(prompts_dir)  # a broken set fails now, not after the models load
    return config


def check_cache_file(path: Path) -> None:
    """The response cache must be a file (or creatable as one).

    Raises:
        UserError: ``path`` is a directory, or its directory cannot be written.
    """
    resolved = path.expanduser()
    if resolved.is_dir():
        raise UserError(f"--cache {path} is a directory; give a file, e.g. {path}/responses.sqlite")
    if not resolved.exists():
        check_writable_dir(resolved.parent, "--cache")


def check_writable_dir(path: Path, flag: str) -> None:
    """``path`` is a directory we may write into, or can be created as one.

    Raises:
        UserError: ``path`` (or the first existing parent) is a file, or is not writable.
    """
    resolved = path.expanduser()
    probe = resolved
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is" if probe == resolved else f"is under {probe}, which is"
        raise UserError(f"{flag} {path} {where} a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {probe} is not writable")


# -- context policy (one self-contained block: the flags, and what they need) ------------

CONTEXT = "Context"

ContextPolicyOpt = Annotated[
    str,
    typer.Option(
        "--context-policy",
        help="How each call's context is chosen from the history: "
        + ", ".join(CONTEXT_POLICIES)
        + " (attention: in-process --llm hf:... only). See README 'Context policies'.",
        rich_help_panel=CONTEXT,
    ),
]
MaxContextTokensOpt = Annotated[
    int,
    typer.Option(
        "--max-context-tokens",
        help="The MLLM's context window; every call fits it minus a reply reserve "
        f"({AgentConfig.context_reserve_tokens} tokens).",
        rich_help_panel=CONTEXT,
    ),
]


def check_context_backend(config: AgentConfig, backends: BackendOptions) -> None:
    """The context policy can be served by the MLLM the flags select; loads nothing.

    The values themselves are checked by :func:`config_from_flags`; this is the part that
    depends on the backend, so call it after :meth:`BackendOptions.validate`.

    Raises:
        UserError: ``--context-policy attention`` with an MLLM that is not the in-process
            transformers backend (an endpoint does not report attention).
    """
    if config.context_policy != "attention":
        return
    choice = check_chat_options(llm=backends.llm, url=backends.llm_url, model=backends.llm_model)
    if choice.kind != "hf":
        raise UserError(
            "--context-policy attention needs the in-process transformers MLLM "
            "(--llm hf:<model>); an endpoint does not report attention"
        )
