"""What the demo and the MCP server share about sessions on the event loop: a session run as
its own task, its rounds streamed as they end, and a model built once in a thread."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Generic, TypeVar

import anyio

from sam3_agent.agent.events import RoundCallback, RoundEvent

R = TypeVar("R")


def start_session(
    session: Callable[[RoundCallback], Coroutine[Any, Any, R]],
) -> tuple[asyncio.Task[R], AsyncIterator[RoundEvent]]:
    """``session`` as its own task, and its rounds as they end (until the task ended)."""
    events: asyncio.Queue[RoundEvent | None] = asyncio.Queue()
    task = asyncio.create_task(session(events.put_nowait))
    # On this loop: the rounds come first.
    task.add_done_callback(lambda _: events.put_nowait(None))

    async def rounds() -> AsyncIterator[RoundEvent]:
        while (event := await events.get()) is not None:
            yield event

    return task, rounds()


async def end_session(task: asyncio.Task[Any], *, shield: bool) -> None:
    """Cancel ``task`` if it still runs and wait for it, raising nothing of it; ``shield``:
    the caller's own cancellation cannot cut the wait short (else it ends it, silently)."""
    if task.done():
        return
    task.cancel()
    waiting: contextlib.AbstractContextManager[Any] = (
        anyio.CancelScope(shield=True) if shield else contextlib.suppress(BaseException)
    )
    with waiting:
        await asyncio.gather(task, return_exceptions=True)


class BuiltOnce(Generic[R]):
    """A value ``build`` makes in a thread on the first :meth:`get`, again after a failure; a
    caller cancelled while it builds does not stop the building."""

    def __init__(self, build: Callable[[], R]) -> None:
        self._build = build
        self._future: asyncio.Future[R] | None = None

    @property
    def ready(self) -> bool:
        future = self._future
        return future is not None and future.done() and not future.exception()

    async def get(self) -> R:
        if self._future is None or (self._future.done() and self._future.exception() is not None):
            self._future = asyncio.ensure_future(asyncio.to_thread(self._build))
        return await asyncio.shield(self._future)
