"""When to retry a failed request, for every HTTP client: exponential backoff, with or without
jitter, and the server's own ``Retry-After`` when it sends one."""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from sam3_agent.values.errors import UserError


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before retrying a failed request."""

    max_retries: int = 5  # after the first attempt
    backoff_base_s: float = 0.5  # the first backoff's ceiling, doubling with every retry
    backoff_cap_s: float = 30.0
    max_retry_after_s: float = 120.0
    jitter: bool = True  # a random wait in [ceiling / 2, ceiling], else the ceiling

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise UserError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_base_s < 0 or self.backoff_cap_s < 0:
            raise UserError("backoff_base_s and backoff_cap_s must be >= 0")

    def delay(
        self, retry: int, retry_after_s: float | None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry ``retry`` (1-based); the server's ``Retry-After``
        wins (clamped to ``max_retry_after_s``)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_retry_after_s)
        # 2.0 ** n overflows past n = 1023; long before that every ceiling is past any cap.
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2.0 ** min(retry - 1, 64))
        if not self.jitter:
            return ceiling
        return (rng or random).uniform(ceiling / 2.0, ceiling)


def retry_after(response: Any) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, or ``Retry-After`` in seconds
    or as an HTTP date. ``None`` when absent or unreadable (NaN included)."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value
