"""Build the chat model the CLI and API ask for (OpenAI-compatible endpoint or in-process).

Which backend:

* ``llm="hf:<hub id or dir>"``: :class:`TransformersChatModel` in this process.
* ``url`` and/or ``model`` (or ``OPENAI_BASE_URL`` in the environment): an
  :class:`OpenAIChatModel` at that endpoint; several URLs: one per endpoint behind a
  :class:`~sam3_agent.backends.failover.FailoverChatModel`.
* neither: :class:`TransformersChatModel` with :data:`DEFAULT_HF_MODEL`.

With ``cache`` the model is wrapped in a :class:`CachedChatModel`. Options that contradict
each other raise :class:`UserError` before any weights are loaded.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from sam3_agent.backends.base import ChatModel
from sam3_agent.backends.failover import FailoverChatModel
from sam3_agent.backends.hf_chat import DEFAULT_HF_MODEL, TransformersChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.backends.response_cache import CachedChatModel
from sam3_agent.config import TOOL_PROTOCOLS
from sam3_agent.errors import UserError

logger = logging.getLogger(__name__)

HF_PREFIX = "hf:"

__all__ = ["DEFAULT_HF_MODEL", "build_chat_model"]


def build_chat_model(
    *,
    llm: str | None = None,
    url: str | Sequence[str] | None = None,
    model: str | None = None,
    api_key: str | None = None,
    tool_protocol: str = "tags",
    cache: str | None = None,
    replay: bool = False,
    timeout_s: float = 120.0,
    device: str = "auto",
    dtype: str = "auto",
) -> ChatModel:
    """``llm="hf:<id or dir>"`` for in-process transformers; ``url``/``model`` for an endpoint.

    Args:
        llm: ``"hf:<hub id or local dir>"``: an in-process model.
        url: an OpenAI-compatible base URL (``.../v1``), or several serving the same model
            (calls spread over them, failing over); ``OPENAI_BASE_URL`` when not given.
        model: the model name at the endpoint (required with an endpoint).
        api_key: the endpoint's key; ``OPENAI_API_KEY`` when not given.
        tool_protocol: ``"tags"`` or ``"native"`` (endpoints only).
        cache: an SQLite file caching responses.
        replay: with ``cache``: a request not in the cache is an error.
        timeout_s: seconds per endpoint request.
        device, dtype: for the in-process model (see :func:`torch_runtime.resolve_dtype`).

    Raises:
        UserError: contradictory or malformed options.
        WeightsUnavailableError: the in-process model's weights cannot be loaded.
    """
    if tool_protocol not in TOOL_PROTOCOLS:
        raise UserError(
            f"--tool-protocol must be one of {', '.join(TOOL_PROTOCOLS)}, got {tool_protocol!r}"
        )
    if replay and not cache:
        raise UserError("--replay answers from the response cache: give --cache FILE too")
    if replay and cache and not Path(cache).expanduser().is_file():
        raise UserError(f"--replay needs an existing response cache; {cache} does not exist")
    inner = _build_inner(
        llm=llm,
        url=url,
        model=model,
        api_key=api_key,
        tool_protocol=tool_protocol,
        timeout_s=timeout_s,
        device=device,
        dtype=dtype,
    )
    if cache:
        return CachedChatModel(inner, cache, replay=replay)
    return inner


# With several endpoints a dead one should hand its call on quickly, not after the single
# endpoint's full backoff; the other endpoints are the retry.
FAILOVER_RETRIES_PER_ENDPOINT = 1


def _urls(url: str | Sequence[str] | None) -> list[str]:
    if url is None:
        return []
    if isinstance(url, str):
        return [url] if url.strip() else []
    return [u for u in url if u.strip()]


def _build_inner(
    *,
    llm: str | None,
    url: str | Sequence[str] | None,
    model: str | None,
    api_key: str | None,
    tool_protocol: str,
    timeout_s: float,
    device: str,
    dtype: str,
) -> ChatModel:
    if llm is not None:
        if url:
            raise UserError(
                "give either --llm hf:<model> (in-process) or --llm-url (an endpoint), not "
                "both; --llm-url may come from OPENAI_BASE_URL in the environment"
            )
        if model:
            raise UserError(
                "--llm-model names a model at an endpoint; with --llm the model is the "
                "hf:<id or dir> itself"
            )
        if not llm.startswith(HF_PREFIX) or not llm[len(HF_PREFIX) :].strip():
            raise UserError(f"--llm must look like 'hf:<hub id or local dir>', got {llm!r}")
        return _build_hf(llm[len(HF_PREFIX) :].strip(), tool_protocol, device, dtype)
    urls = _urls(url)
    if len(urls) > 1:
        if not model:
            raise UserError(f"--llm-model is required with the endpoints {', '.join(urls)}")
        logger.info("MLLM: %s at %d endpoints: %s", model, len(urls), ", ".join(urls))
        return FailoverChatModel(
            [
                OpenAIChatModel(
                    model,
                    base_url=u,
                    api_key=api_key,
                    timeout_s=timeout_s,
                    max_retries=FAILOVER_RETRIES_PER_ENDPOINT,
                    tool_protocol=tool_protocol,
                )
                for u in urls
            ]
        )
    endpoint = (urls[0] if urls else None) or os.environ.get("OPENAI_BASE_URL") or None
    if endpoint or model:
        if not model:
            raise UserError(f"--llm-model is required with the endpoint {endpoint}")
        logger.info("MLLM: %s at %s", model, endpoint or "the OpenAI API")
        return OpenAIChatModel(
            model,
            base_url=endpoint,
            api_key=api_key,
            timeout_s=timeout_s,
            tool_protocol=tool_protocol,
        )
    logger.info("MLLM: no endpoint configured, loading %s in-process", DEFAULT_HF_MODEL)
    return _build_hf(DEFAULT_HF_MODEL, tool_protocol, device, dtype)


def _build_hf(model_id_or_dir: str, tool_protocol: str, device: str, dtype: str) -> ChatModel:
    if tool_protocol != "tags":
        raise UserError(
            "the in-process transformers backend speaks the tag protocol only; "
            "use --tool-protocol tags, or an endpoint (--llm-url) for native tool calls"
        )
    return TransformersChatModel.from_pretrained(model_id_or_dir, device=device, dtype=dtype)
