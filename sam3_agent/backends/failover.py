"""Several endpoints serving one model as one :class:`ChatModel`: calls go round-robin; one
that failed after its own retries is tried last (not skipped) for ``cooldown_s``, so a call
fails only when every endpoint failed it."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence

from sam3_agent.backends.base import ChatModel, ChatModelWrapper, close_backend
from sam3_agent.values.errors import ChatModelError, UserError
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec

logger = logging.getLogger(__name__)

DEFAULT_COOLDOWN_S = 30.0


class FailoverChatModel(ChatModelWrapper):
    """Round-robin over ``models`` (one model name at different endpoints), failing over; the
    first stands for them all (name, generation params, description)."""

    def __init__(
        self,
        models: Sequence[ChatModel],
        *,
        cooldown_s: float = DEFAULT_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not models:
            raise UserError("failover needs at least one chat model")
        names = {m.name for m in models}
        if len(names) != 1:
            raise UserError(f"every `llm_url` must serve the same model, got {sorted(names)}")
        super().__init__(models[0])
        self.models = list(models)
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._next = itertools.count()
        self._down_until = [0.0] * len(self.models)

    def order(self) -> list[int]:
        """Endpoint indices for the next call: the round-robin turn first, ones down last."""
        n = len(self.models)
        start = next(self._next) % n
        rotated = [(start + k) % n for k in range(n)]
        now = self._clock()
        return [i for i in rotated if self._down_until[i] <= now] + [
            i for i in rotated if self._down_until[i] > now
        ]

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        last: ChatModelError | None = None
        for index in self.order():
            try:
                response = await self.models[index].complete(messages, tools=tools)
            except ChatModelError as e:
                self._down_until[index] = self._clock() + self.cooldown_s
                logger.warning(
                    "endpoint %d of %d failed, failing over: %s", index + 1, len(self.models), e
                )
                last = e
                continue
            self._down_until[index] = 0.0
            return response
        raise ChatModelError(
            f"all {len(self.models)} MLLM endpoints failed; last: {last}"
        ) from last

    async def aclose(self) -> None:
        for model in self.models:
            await close_backend(model)
