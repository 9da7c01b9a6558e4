"""One call for applications that want an answer and no setup.

:func:`segment` builds the backends, runs one session and returns its result. Building SAM 3
and an MLLM takes seconds to minutes, so for many requests build a
:class:`~sam3_agent.agent.loop.Sam3Agent` once and call its ``run`` instead.
"""

from __future__ import annotations

from pathlib import Path

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult
from sam3_agent.backends.chat_models import build_chat_model
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL, build_segmenter
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.images import ImageInput


def segment(
    image: ImageInput,
    query: str,
    *,
    output_dir: str | Path | None = None,
    config: AgentConfig | None = None,
    sam3: str = DEFAULT_SAM3_MODEL,
    sam3_url: str | None = None,
    sam3_token: str | None = None,
    llm: str | None = None,
    llm_url: str | None = None,
    llm_model: str | None = None,
    llm_api_key: str | None = None,
    device: str = "auto",
) -> AgentResult:
    """Segment what ``query`` describes in ``image`` with the default or given backends.

    The backend arguments mean what the CLI flags of the same names mean: SAM 3 in process
    (``sam3``) or remote (``sam3_url``, with ``sam3_token`` or else the ``SAM3_AGENT_TOKEN``
    environment variable as its bearer token); the MLLM in process (``llm="hf:<id or dir>"``, the
    default when no endpoint is given) or at an OpenAI-compatible endpoint
    (``llm_url``/``llm_model``).

    Raises:
        UserError, ImageLoadError, WeightsUnavailableError, ChatModelError, SegmenterError.
    """
    config = config or AgentConfig()
    segmenter = build_segmenter(model=sam3, url=sam3_url, token=sam3_token, device=device)
    chat_model = build_chat_model(
        llm=llm,
        url=llm_url,
        model=llm_model,
        api_key=llm_api_key,
        tool_protocol=config.tool_protocol,
        device=device,
    )
    return Sam3Agent(segmenter, chat_model, config).run(image, query, output_dir=output_dir)
