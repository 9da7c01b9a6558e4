"""An opt-in SQLite cache of chat completions (cheap reruns, deterministic replay). A hit has
``cached=True`` and zero usage (its tokens summed in ``stats``); every answer is stored, failures
are not; processes may share a file (WAL, busy timeout, first answer for a key wins)."""

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
    """``saved``: the original usage of the answers served from the file."""

    hits: int = 0
    misses: int = 0
    saved: TokenUsage = field(default_factory=TokenUsage)


class ReplayingChatModel(ChatModelWrapper):
    """Answers a request it recorded without asking ``inner`` and records every answer of
    ``inner``; a subclass says where (the cache's SQLite file, the journal's ``calls.jsonl``)."""

    def key(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None) -> str:
        return request_key(
            messages, tools, model=self.name, generation_params=self.generation_params
        )

    async def recorded(self, key: str) -> ChatResponse | None:
        raise NotImplementedError

    async def record(self, key: str, response: ChatResponse) -> None:
        raise NotImplementedError

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        key = self.key(messages, tools)
        found = await self.recorded(key)
        if found is not None:
            return found
        response = await self.inner.complete(messages, tools=tools)
        await self.record(key, response)
        return response


class CachedChatModel(ReplayingChatModel):
    """Answered from the SQLite file ``path`` where it can; with ``replay`` a miss raises
    :class:`ReplayMissError` instead of calling ``inner``."""

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
        # Switching a new file to WAL takes a lock without SQLite's busy handler, so writers
        # opening one fresh file together can get "database is locked": retry it too.
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
