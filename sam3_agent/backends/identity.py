"""Backend descriptions (``describe()``), made here both by backends and by ``BackendSpec``
from the options alone, so a resumed session's check agrees by construction: option name ->
JSON value, defaults resolved; ``None``: not set; an option left out is unknown."""

from __future__ import annotations

import json
from typing import Any

from sam3_agent.backends.generation import GenerationSettings, canonical_json

HF_PREFIX = "hf:"
CHAT = "mllm"
SEGMENTER = "sam3"
TOKEN_ENV = "SAM3_AGENT_TOKEN"  # the SAM 3 service's bearer token (server and clients)


def chat_description(
    *,
    model: str,
    in_process: bool,
    temperature: float | None,
    max_tokens: int | None,
    generation: GenerationSettings,
    dtype: str | None = None,
) -> dict[str, Any]:
    """A chat model's description; ``temperature`` and ``max_tokens`` as sent, defaults
    resolved; ``dtype`` ``None``: unknown, left out."""
    extra = generation.extra_body
    description: dict[str, Any] = {
        "--llm": f"{HF_PREFIX}{model}" if in_process else None,
        "--llm-model": None if in_process else model,
        "--temperature": temperature,
        "--max-tokens": max_tokens,
        "--seed": generation.seed,
        "--llm-extra": json.loads(canonical_json(extra)) if extra else None,
    }
    if dtype is not None:
        description["--dtype"] = dtype
    return description


def sam3_description(
    *, model: str | None = None, url: str | None = None, dtype: str | None = None
) -> dict[str, Any]:
    """SAM 3 in process (``model``, ``dtype``: ``None`` is unknown, left out) or the service
    at ``url``."""
    if url is not None:
        return {"--sam3": None, "--sam3-url": url.rstrip("/")}
    description: dict[str, Any] = {"--sam3-url": None}
    if model is not None:
        description["--sam3"] = model
    if dtype is not None:
        description["--dtype"] = dtype
    return description


def dtype_name(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")
