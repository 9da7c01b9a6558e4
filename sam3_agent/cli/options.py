"""Option types shared by the commands, and the backend options they build.

Each command declares ``sam3: Sam3ModelOpt = DEFAULT_SAM3_MODEL`` etc., then calls
:meth:`BackendOptions.build_segmenter` / :meth:`BackendOptions.build_chat_model`, so
``run`` and ``eval`` take exactly the same backend flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.backends.chat_models import build_chat_model
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL, build_segmenter
from sam3_agent.config import AgentConfig, ToolProtocol

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
        help="dtype for in-process models: auto (bfloat16 on CUDA, float32 on CPU), "
        "float32, bfloat16, float16.",
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

    def __post_init__(self) -> None:
        # A repeatable flag arrives as a list: one URL stays a plain string, several a tuple.
        urls = self.llm_url
        if urls is not None and not isinstance(urls, str):
            urls = tuple(urls)
            object.__setattr__(self, "llm_url", urls[0] if len(urls) == 1 else urls or None)

    def build_segmenter(self) -> Segmenter:
        return build_segmenter(
            model=self.sam3,
            url=self.sam3_url,
            token=self.sam3_token,
            device=self.device,
            dtype=self.dtype,
        )

    def build_chat_model(self) -> ChatModel:
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
        )


def config_from_flags(
    *,
    max_rounds: int,
    max_corrections: int,
    check_concurrency: int,
    score_threshold: float,
    max_image_side: int,
    tool_protocol: ToolProtocol,
) -> AgentConfig:
    """The :class:`AgentConfig` for the agent flags every command shares."""
    return AgentConfig(
        max_rounds=max_rounds,
        max_corrections=max_corrections,
        check_concurrency=check_concurrency,
        score_threshold=score_threshold,
        max_image_side=max_image_side,
        tool_protocol=tool_protocol,
    )
