"""Build the chat model asked for: ``llm="hf:..."`` in process, ``url`` and ``model`` (or
``OPENAI_BASE_URL``) an endpoint (several: a failover), neither the machine's default, which
``BackendSpec.plan`` chooses. Options are checked before torch or openai are imported."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sam3_agent.backends.generation import GenerationSettings
from sam3_agent.backends.identity import HF_PREFIX
from sam3_agent.backends.memory import GPU_DEFAULT_MLLM
from sam3_agent.values.config import TOOL_PROTOCOLS
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel

logger = logging.getLogger(__name__)

DEFAULT_HF_MODEL = GPU_DEFAULT_MLLM
# With several endpoints a dead one should hand its call on quickly, not after the single
# endpoint's full backoff; the other endpoints are the retry.
FAILOVER_RETRIES_PER_ENDPOINT = 1


@dataclass(frozen=True)
class ChatChoice:
    """Which chat backend the options select; ``default``: none named, ``plan`` picks one."""

    kind: Literal["endpoint", "hf"]
    model: str
    url: str | None = None  # None: the OpenAI API; with several, the first
    default: bool = False
    urls: tuple[str, ...] = ()  # every endpoint when several serve the model


def check_chat_options(
    llm: str | None = None,
    url: str | Sequence[str] | None = None,
    model: str | None = None,
    tool_protocol: str = "tags",
    cache: str | None = None,
    replay: bool = False,
    timeout_s: float = 120.0,
    generation: GenerationSettings | None = None,
) -> ChatChoice:
    """Check the chat options together and say which backend they select; loads nothing."""
    if tool_protocol not in TOOL_PROTOCOLS:
        raise UserError(
            f"`tool_protocol` must be one of {', '.join(TOOL_PROTOCOLS)}, got {tool_protocol!r}"
        )
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise UserError(f"`llm_timeout` must be a number of seconds > 0, got {timeout_s}")
    if replay and not cache:
        raise UserError("`replay=True` answers from the response cache: give `cache='FILE'` too")
    if replay and cache and not Path(cache).expanduser().is_file():
        raise UserError(f"`replay=True` needs an existing response cache; {cache} does not exist")
    choice = _choose(llm=llm, url=url, model=model)
    if choice.kind == "hf":
        if tool_protocol != "tags":
            raise UserError(
                "the in-process transformers backend speaks the tag protocol only; "
                "use `tool_protocol='tags'`, or an endpoint (`llm_url`) for native tool calls"
            )
        extra = set((generation.extra_body if generation else None) or {})
        if extra - {"chat_template_kwargs"}:
            raise UserError(
                "`llm_extra`: the in-process model reads only chat_template_kwargs, got "
                + ", ".join(sorted(extra - {"chat_template_kwargs"}))
            )
    return choice


def _urls(url: str | Sequence[str] | None) -> list[str]:
    if url is None:
        return []
    if isinstance(url, str):
        return [url] if url.strip() else []
    return [u for u in url if u.strip()]


def _choose(*, llm: str | None, url: str | Sequence[str] | None, model: str | None) -> ChatChoice:
    urls = _urls(url)
    if llm is not None:
        if urls:
            raise UserError(
                "give either `llm='hf:<model>'` (in-process) or `llm_url` (an endpoint), not "
                "both; `llm_url` may come from OPENAI_BASE_URL in the environment"
            )
        if model:
            raise UserError(
                "`llm_model` names a model at an endpoint; with `llm` the model is the "
                "hf:<id or dir> itself"
            )
        if not llm.startswith(HF_PREFIX) or not llm[len(HF_PREFIX) :].strip():
            raise UserError(f"`llm` must look like 'hf:<hub id or local dir>', got {llm!r}")
        return ChatChoice("hf", llm[len(HF_PREFIX) :].strip())
    endpoints = urls or [os.environ.get("OPENAI_BASE_URL") or ""]
    endpoint = endpoints[0] or None
    for each in endpoints:
        if each and not each.startswith(("http://", "https://")):
            raise UserError(f"`llm_url` must be an http:// or https:// URL, got {each!r}")
    if endpoint or model:
        if not model:
            raise UserError(
                f"`llm_model` is required with the endpoint{'s' if len(urls) > 1 else ''} "
                f"{', '.join(urls) or endpoint} (the model's name there, "
                "e.g. Qwen/Qwen3-VL-8B-Instruct)"
            )
        several = tuple(urls) if len(urls) > 1 else ()
        return ChatChoice("endpoint", model, endpoint, urls=several)
    return ChatChoice("hf", DEFAULT_HF_MODEL, default=True)


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
    generation: GenerationSettings | None = None,
) -> ChatModel:
    """The chat model the options select. With no model named it raises ValueError: the
    default is chosen by :meth:`~sam3_agent.backends.spec.BackendSpec.plan`."""
    # Positional: the same names, in check_chat_options' order.
    choice = check_chat_options(
        llm, url, model, tool_protocol, cache, replay, timeout_s, generation
    )
    if choice.default:
        raise ValueError("no MLLM named: build it with BackendSpec, which plans the default")
    inner: ChatModel
    if choice.kind == "endpoint":
        from sam3_agent.backends.failover import FailoverChatModel
        from sam3_agent.backends.openai_chat import OpenAIChatModel

        def endpoint(url: str | None, **retries: Any) -> OpenAIChatModel:
            return OpenAIChatModel(
                choice.model,
                url,
                api_key,
                timeout_s,
                **retries,
                tool_protocol=tool_protocol,
                generation=generation,
            )

        if choice.urls:
            urls = ", ".join(choice.urls)
            logger.info("MLLM: %s at %d endpoints: %s", choice.model, len(choice.urls), urls)
            inner = FailoverChatModel(
                [endpoint(u, max_retries=FAILOVER_RETRIES_PER_ENDPOINT) for u in choice.urls]
            )
        else:
            logger.info("MLLM: %s at %s", choice.model, choice.url or "the OpenAI API")
            inner = endpoint(choice.url)
    else:
        from sam3_agent.backends.hf_chat import TransformersChatModel

        logger.info("MLLM: loading %s in-process", choice.model)
        inner = TransformersChatModel.from_pretrained(
            choice.model, device=device, dtype=dtype, generation=generation
        )
    if cache:
        from sam3_agent.backends.response_cache import CachedChatModel

        return CachedChatModel(inner, cache, replay=replay)
    return inner
