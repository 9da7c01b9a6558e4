"""Generation settings for the MLLM, validated once (before any model loads) and read by
every chat backend."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sam3_agent.values.config import at_least, check_settings, setting
from sam3_agent.values.errors import UserError

MAX_TEMPERATURE = 2.0  # the OpenAI API's largest; local servers follow it
MAX_EXTRA_BYTES = 64 * 1024  # a few settings, not a payload
DEFAULT_TEMPERATURE = 0.0  # greedy
ENDPOINT_MAX_TOKENS = 4096  # reasoning models may need more
IN_PROCESS_MAX_TOKENS = 2048

T = TypeVar("T", float, float | None)
N = TypeVar("N", int, int | None)


@dataclass(frozen=True)
class GenerationSettings:
    """What the user asked of generation; ``None`` leaves the backend's own default.
    ``extra_body`` is merged into each endpoint request (in process: its
    ``chat_template_kwargs`` only)."""

    temperature: float | None = setting(
        None,
        lambda t: math.isfinite(t) and 0.0 <= t <= MAX_TEMPERATURE,
        f"in [0, {MAX_TEMPERATURE:g}]",
        optional=True,
    )
    max_tokens: int | None = at_least(None, 1, optional=True)
    seed: int | None = setting(None, lambda s: 0 <= s < 2**63, "in [0, 2**63)", optional=True)
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_settings(self)
        if self.extra_body is not None and not isinstance(self.extra_body, Mapping):
            raise UserError("`extra_body` must be a mapping (a JSON object)")

    @property
    def chat_template_kwargs(self) -> dict[str, Any]:
        value = (self.extra_body or {}).get("chat_template_kwargs") or {}
        return dict(value)

    def resolved(self, *, in_process: bool) -> tuple[float, int]:
        """``(temperature, max_tokens)`` as a chat backend built from these sends them."""
        default_max = IN_PROCESS_MAX_TOKENS if in_process else ENDPOINT_MAX_TOKENS
        return self.over(DEFAULT_TEMPERATURE, default_max)

    def over(self, temperature: T, max_tokens: N) -> tuple[T, N]:
        """``(temperature, max_tokens)``: these settings where given, else the arguments."""
        return (
            temperature if self.temperature is None else self.temperature,
            max_tokens if self.max_tokens is None else self.max_tokens,
        )

    def key_params(self) -> dict[str, Any]:
        """The settings that were given, for cache keys (absent ones leave keys unchanged)."""
        params: dict[str, Any] = {}
        if self.seed is not None:
            params["seed"] = self.seed
        if self.extra_body:
            params["extra_body"] = json.loads(canonical_json(self.extra_body))
        return params


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: equal settings give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_extra_body(text: str | None) -> dict[str, Any] | None:
    """``llm_extra`` as a dict; ``None`` when not given."""
    if text is None:
        return None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_EXTRA_BYTES:
        raise UserError(f"`llm_extra` is longer than {MAX_EXTRA_BYTES} bytes")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise UserError(f"`llm_extra` is not valid JSON: {str(e).splitlines()[0]}") from e
    if not isinstance(value, dict):
        example = '{"chat_template_kwargs": {"enable_thinking": true}}'
        raise UserError(
            f"`llm_extra` must be a JSON object such as '{example}', got {type(value).__name__}"
        )
    kwargs = value.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise UserError("`llm_extra`: chat_template_kwargs must be a JSON object")
    return value
