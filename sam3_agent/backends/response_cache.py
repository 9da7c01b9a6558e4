"""An opt-in SQLite cache of chat completions, for cheap reruns and deterministic replay, on
the replay mechanism it shares with the resume journal (:class:`ReplayingChatModel`).

A request is keyed by :func:`~sam3_agent.values.messages.request_key` (the sha256 of a
canonical JSON of the model name, the messages with each image by the sha256 of its encoded
bytes, the tool specs, and the generation parameters the inner model exposes as
``generation_params``); the answer is stored as
:func:`~sam3_agent.values.messages.response_to_json` writes it. Identical requests in later
runs (or other processes) are answered from the file without calling the model. The key
carries :data:`~sam3_agent.values.messages.REQUEST_KEY_FORMAT`; records written before
tool-call ids were kept still read (what they lack takes its default).

Decisions:

* A hit is a :class:`ChatResponse` with ``cached=True`` and ``usage = TokenUsage(0, 0, 0)``:
  no request was made and no token spent, so summed usage is what the run cost. The
  tokens the answer originally cost stay in the database row (``prompt_tokens``,
  ``completion_tokens``) and are summed per instance in :attr:`CachedChatModel.stats`
  (``saved``).
* Every answer is stored, including ones cut off by the token limit: replay must
  reproduce the run as it happened. Failed requests (exceptions) are not stored.
* Several processes may share one file: WAL journal, a busy timeout, and
  ``INSERT OR IGNORE`` (the first answer stored for a key wins; a concurrent duplicate
  is dropped). Each operation opens its own short-lived connection in a worker thread,
  so a writer waiting on a lock never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path

from sam3_agent.backends.base import ChatModel, ChatModelWrapper
from sam3_agent.values.errors import ReplayMissError, UserError
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    TokenUsage,
    ToolSpec,
    request_key,
    response_from_json,
    response_to_json,
)

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
)
"""


@dataclass
class CacheStats:
    """What the cache did for one :class:`CachedChatModel`.

    Attributes:
        hits: requests answered from the file.
        misses: requests passed to the inner model (and stored).
        saved: the original usage of the answers served from the file.
    """

    hits: int = 0
    misses: int = 0
    saved: TokenUsage = field(default_factory=TokenUsage)


class ReplayingChatModel(ChatModelWrapper):
    """A :class:`ChatModel` that answers a request it recorded, found by its key, without
    asking ``inner``, and records every answer ``inner`` gives. A subclass says where the
    answers are kept (:meth:`recorded`, :meth:`record`): the response cache's SQLite file, or
    the resume journal's ``calls.jsonl``; both are keyed alike (:meth:`key`)."""

    def key(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None) -> str:
        """The key of a request to this model."""
        return request_key(
            messages, tools, model=self.name, generation_params=self.generation_params
        )

    async def recorded(self, key: str) -> ChatResponse | None:
        """The answer recorded for ``key``, or None to ask the inner model."""
        raise NotImplementedError

    async def record(self, key: str, response: ChatResponse) -> None:
        """Keep ``response`` as the answer to ``key``."""
        raise NotImplementedError

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        """The recorded answer, or the inner model's (then recorded).

        Raises:
            ChatModelError: the inner model failed (nothing is recorded).
        """
        key = self.key(messages, tools)
        found = await self.recorded(key)
        if found is not None:
            return found
        response = await self.inner.complete(messages, tools=tools)
        await self.record(key, response)
        return response


class CachedChatModel(ReplayingChatModel):
    """Wraps a :class:`ChatModel` with the response cache in the SQLite file ``path``.

    Args:
        inner: the model asked on a miss.
        path: the SQLite file; created (with its directory) unless ``replay`` is on.
        replay: a miss raises :class:`ReplayMissError` instead of calling ``inner``.
        busy_timeout_s: how long a writer waits for another process's lock.

    Raises:
        UserError: the file cannot be opened, or ``replay`` is on and it does not exist.
    """

    def __init__(
        self,
        inner: ChatModel,
        path: str | Path,
        replay: bool = False,
        *,
        busy_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(inner)
        self.path = Path(path).expanduser()
        self.replay = replay
        self.busy_timeout_s = busy_timeout_s
        self.stats = CacheStats()
        self._stats_lock = threading.Lock()
        if replay and not self.path.is_file():
            raise UserError(f"replay needs an existing response cache; {self.path} does not exist")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._create()
        except (sqlite3.Error, OSError) as e:
            raise UserError(f"cannot open the response cache {self.path}: {e}") from e

    def _create(self) -> None:
        # Switching a new file to WAL takes an exclusive lock for which SQLite does not call
        # the busy handler, so writers opening one fresh file together can get "database is
        # locked" at once. Retry that for the busy timeout, like any other lock wait.
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                with closing(self._connect()) as db, db:
                    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                        db.execute("PRAGMA journal_mode=WAL")
                    db.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    async def recorded(self, key: str) -> ChatResponse | None:
        """The stored answer (``cached``, no usage), or None on a miss.

        Raises:
            ReplayMissError: replay is on and the cache has no answer for this request.
        """
        hit = await asyncio.to_thread(self._get, key)
        if hit is not None:
            response, original = hit
            with self._stats_lock:
                self.stats.hits += 1
                self.stats.saved = self.stats.saved + original
            logger.debug("response cache hit %s for %s", key[:12], self.name)
            return response
        if self.replay:
            raise ReplayMissError(
                f"replay: the response cache {self.path} has no answer for this request to "
                f"{self.name} (key {key[:12]}); run once without `replay=True` to record it"
            )
        return None

    async def record(self, key: str, response: ChatResponse) -> None:
        await asyncio.to_thread(self._put, key, response)
        with self._stats_lock:
            self.stats.misses += 1

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
        db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
        return db

    def _get(self, key: str) -> tuple[ChatResponse, TokenUsage] | None:
        with closing(self._connect()) as db:
            row = db.execute(
                "SELECT response, prompt_tokens, completion_tokens FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        response = replace(
            response_from_json(json.loads(row[0])), usage=TokenUsage(0, 0, 0), cached=True
        )
        return response, TokenUsage(int(row[1]), int(row[2]), 1)

    def _put(self, key: str, response: ChatResponse) -> None:
        record = response_to_json(response)
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT OR IGNORE INTO responses "
                "(key, model, response, prompt_tokens, completion_tokens, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key,
                    self.name,
                    # ASCII escapes: a lone surrogate in a reply cannot be stored as UTF-8.
                    json.dumps(record),
                    response.usage.prompt_tokens,
                    response.usage.completion_tokens,
                    time.time(),
                ),
            )
