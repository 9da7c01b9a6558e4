"""An OpenAI-compatible chat endpoint (vLLM, hosted APIs) as a :class:`ChatModel`, and its
wire format. 429, 5xx, timeouts and dropped connections are retried by our policy (jitter,
``Retry-After``); other 4xx fail at once. Lone surrogates go out as U+FFFD."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from sam3_agent.backends.generation import (
    DEFAULT_TEMPERATURE,
    ENDPOINT_MAX_TOKENS,
    GenerationSettings,
)
from sam3_agent.backends.identity import chat_description
from sam3_agent.backends.retry import RetryPolicy, retry_after
from sam3_agent.values.config import TOOL_PROTOCOLS
from sam3_agent.values.errors import ChatModelError, UserError
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    NativeToolCall,
    TextPart,
    TokenUsage,
    ToolSpec,
)
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Key-less local servers (vLLM without --api-key) still need some key for the client to start.
PLACEHOLDER_API_KEY = "EMPTY"

# Besides every 5xx.
RETRYABLE_STATUSES = frozenset({408, 429})

SleepFn = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class _Failure:
    description: str
    retryable: bool
    retry_after_s: float | None = None


class OpenAIChatModel:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint; safe to call concurrently from
    one event loop. ``base_url``/``api_key`` fall back to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``;
    ``timeout_s`` is per attempt; ``max_tokens``/``temperature`` ``None`` send none, and
    ``generation``'s win over them; ``seed`` seeds the retry jitter only."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        max_tokens: int | None = ENDPOINT_MAX_TOKENS,
        temperature: float | None = DEFAULT_TEMPERATURE,
        tool_protocol: str = "tags",
        *,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        sleep: SleepFn = asyncio.sleep,
        seed: int | None = None,
        generation: GenerationSettings | None = None,
    ) -> None:
        if not model:
            raise UserError("an MLLM model name is required for the endpoint (`llm_model`)")
        if tool_protocol not in TOOL_PROTOCOLS:
            raise UserError(
                f"tool_protocol must be one of {', '.join(TOOL_PROTOCOLS)}, got {tool_protocol!r}"
            )
        if timeout_s <= 0:
            raise UserError(f"timeout_s must be > 0, got {timeout_s}")
        self._model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.timeout_s = float(timeout_s)
        self.generation = generation or GenerationSettings()
        self.temperature, self.max_tokens = self.generation.over(temperature, max_tokens)
        self.tool_protocol: str = tool_protocol
        self.retry = RetryPolicy(
            max_retries=max_retries, backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s
        )
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
        self._client = self._new_client()
        # The loop the client's pooled connections belong to; set by the first request.
        self._client_loop: weakref.ReferenceType[asyncio.AbstractEventLoop] | None = None
        self.endpoint = str(self._client.base_url).rstrip("/")

    def _new_client(self) -> openai.AsyncOpenAI:
        # max_retries=0: the retry policy is ours (see complete), not the client's.
        # An explicit DefaultAsyncHttpxClient (openai's own defaults) because the client it
        # builds otherwise schedules its aclose() on whatever loop runs when it is garbage
        # collected, which fails noisily once we replaced it after its loop closed.
        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(timeout=self.timeout_s),
        )

    def _client_for_running_loop(self) -> openai.AsyncOpenAI:
        """The client, made anew when a new event loop shows up: pooled connections belong
        to their loop, so one ``asyncio.run`` per request would otherwise fail with "Event
        loop is closed" on the second."""
        loop = asyncio.get_running_loop()
        if self._client_loop is None:
            self._client_loop = weakref.ref(loop)
        elif self._client_loop() is not loop:
            logger.debug("new event loop: new HTTP client for %s", self.endpoint)
            self._client = self._new_client()
            self._client_loop = weakref.ref(loop)
        return self._client

    @property
    def name(self) -> str:
        return self._model

    @property
    def generation_params(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "tool_protocol": self.tool_protocol,
            **self.generation.key_params(),
        }

    def describe(self) -> dict[str, Any]:
        return chat_description(
            model=self._model,
            in_process=False,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            generation=self.generation,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        """Send one conversation, retrying transient failures; every failure is a one-line
        ChatModelError naming the endpoint."""
        try:
            return await self._complete(messages, tools)
        except ChatModelError as e:
            if "\n" not in str(e):
                raise
            raise ChatModelError(one_line(str(e))) from e
        except Exception as e:  # anything a library raises while serving is one failure
            raise ChatModelError(
                f"MLLM endpoint {self.endpoint} (model {self._model}): "
                f"{type(e).__name__}: {one_line(str(e)) or 'no detail'}"
            ) from e

    async def _complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None
    ) -> ChatResponse:
        request = self._request(messages, tools)
        client = self._client_for_running_loop()
        attempts = self.retry.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                completion = await client.chat.completions.create(**request, timeout=self.timeout_s)
            except openai.OpenAIError as e:
                failure = self._classify(e)
                if not failure.retryable:
                    raise ChatModelError(
                        f"MLLM endpoint {self.endpoint} (model {self._model}): "
                        f"{failure.description}"
                    ) from e
                if attempt >= attempts:
                    raise ChatModelError(
                        f"MLLM endpoint {self.endpoint} (model {self._model}) failed "
                        f"{attempts} times; last failure: {failure.description}"
                    ) from e
                wait = self.retry.delay(attempt, failure.retry_after_s, self._rng)
                # Progress, not a problem yet: the error says so if the last retry fails too.
                logger.info(
                    "MLLM request to %s failed (%s); retry %d/%d in %.2f s",
                    self.endpoint,
                    failure.description,
                    attempt,
                    self.retry.max_retries,
                    wait,
                )
                await self._sleep(wait)
                continue
            logger.debug("MLLM reply from %s in %.2f s", self.endpoint, time.monotonic() - started)
            return self._response(completion)

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self._model,
            "messages": [message_to_wire(m) for m in messages],
        }
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.generation.seed is not None:
            request["seed"] = self.generation.seed
        if self.generation.extra_body:
            # The client merges extra_body into the JSON body as is (vLLM's
            # chat_template_kwargs, a hosted API's own settings).
            request["extra_body"] = dict(self.generation.extra_body)
        if self.tool_protocol == "native" and tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        elif tools:
            logger.debug("tool_protocol is 'tags': %d tool specs not sent", len(tools))
        return request

    def _classify(self, error: openai.OpenAIError) -> _Failure:
        if isinstance(error, openai.APITimeoutError):
            return _Failure(f"no answer within {self.timeout_s:g} s (timeout)", retryable=True)
        if isinstance(error, openai.APIConnectionError):
            cause = error.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause else str(error)
            return _Failure(f"connection failed ({detail})", retryable=True)
        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            text = f"HTTP {status}: {_error_text(error)}"
            if status in RETRYABLE_STATUSES or status >= 500:
                return _Failure(text, retryable=True, retry_after_s=retry_after(error.response))
            return _Failure(_explain_status(status, text), retryable=False)
        return _Failure(f"{type(error).__name__}: {error}", retryable=False)

    def _response(self, completion: Any) -> ChatResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ChatModelError(
                f"MLLM endpoint {self.endpoint} (model {self._model}) answered without choices"
            )
        choice = choices[0]
        message = choice.message
        usage = completion.usage
        return ChatResponse(
            text=message.content or "",
            usage=TokenUsage(
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                calls=1,
            ),
            reasoning=reasoning_of(message),
            finish_reason=choice.finish_reason or "stop",
            tool_calls=tool_calls_of(message),
        )


def _error_text(error: openai.APIStatusError) -> str:
    body: Any = error.body  # the client hands on what {"error": ...} holds, where it can
    if isinstance(body, dict):
        body = body.get("error", body)
    if isinstance(body, dict):
        # OpenAI's {"message"}, or FastAPI's {"detail"} (transformers serve)
        body = body.get("message") or body.get("detail")
    return body if isinstance(body, str) and body else error.message


def _explain_status(status: int, text: str) -> str:
    hints = {
        400: "the endpoint refused the request (does the model accept images, and this many?)",
        401: "the endpoint refused the API key (set `llm_api_key` or OPENAI_API_KEY)",
        403: "the API key may not use this model",
        404: "no such model or path (check `llm_model`, and that the URL ends in /v1)",
        413: "the request is too large (fewer or smaller images)",
    }
    hint = hints.get(status)
    return f"{text} - {hint}" if hint else text


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": wire_text(message.joined_text),
        }
    if message.tool_calls:
        return {
            "role": message.role,
            "content": wire_text(message.joined_text) or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": wire_text(call.name),
                        "arguments": wire_text(call.arguments),
                    },
                }
                for call in message.tool_calls
            ],
        }
    if not message.images:
        # Plain strings for text-only messages: some servers accept nothing else for
        # system and assistant turns.
        return {"role": message.role, "content": wire_text(message.joined_text)}
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": wire_text(part.text)})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": part.image.data_url()}})
    return {"role": message.role, "content": content}


def wire_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def reasoning_of(message: Any) -> str | None:
    """The separate reasoning channel: vLLM/DeepSeek ``reasoning_content``, or ``reasoning``."""
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key) if key in extra else getattr(message, key, None)
        if isinstance(value, str) and value:
            return value
    return None


def tool_calls_of(message: Any) -> tuple[NativeToolCall, ...]:
    calls = []
    for call in getattr(message, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        if function is None:
            logger.warning("ignoring a non-function tool call of type %r", call.type)
            continue
        calls.append(NativeToolCall(name=function.name, arguments=function.arguments or ""))
    return tuple(calls)
