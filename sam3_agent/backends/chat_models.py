"""Build the chat model the CLI and API ask for (OpenAI-compatible endpoint or in-process)."""

from __future__ import annotations

from sam3_agent.backends.base import ChatModel
from sam3_agent.errors import UserError


def build_chat_model(
    *,
    llm: str | None = None,
    url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    tool_protocol: str = "tags",
    cache: str | None = None,
    replay: bool = False,
    timeout_s: float = 120.0,
) -> ChatModel:
    """``llm="hf:<id or dir>"`` for in-process transformers; ``url``/``model`` for an endpoint."""
    raise UserError("the MLLM backends are not wired yet")  # replaced by the MLLM issue
