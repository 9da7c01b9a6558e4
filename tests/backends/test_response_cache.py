"""CachedChatModel: keys, hits without tokens, replay, and many writers on one file."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.agent.checkpoint.journal import Journal, JournaledChatModel
from sam3_agent.backends.base import (
    close_backend,
    describe_backend,
    generation_params,
    tokenizer_of,
)
from sam3_agent.backends.failover import FailoverChatModel
from sam3_agent.backends.response_cache import CachedChatModel, ReplayingChatModel
from sam3_agent.values.errors import ChatModelError, ReplayMissError, UserError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    NativeToolCall,
    TextPart,
    TokenUsage,
    ToolSpec,
    request_key,
)


@dataclass
class EchoModel:
    """Answers with the last message's text; counts calls. Importable by worker processes."""

    name: str = "echo"
    generation_params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0})
    calls: int = 0
    fail: bool = False

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.calls += 1
        if self.fail:
            raise ChatModelError("endpoint down")
        return ChatResponse(
            text=f"echo: {messages[-1].joined_text}",
            usage=TokenUsage(100, 10, 1),
            reasoning="because",
            finish_reason="length",
            tool_calls=(NativeToolCall("segment_phrase", '{"text_prompt": "cat"}'),),
        )


def image(seed: int) -> EncodedImage:
    pixels = np.random.default_rng(seed).integers(0, 255, (16, 16, 3), dtype=np.uint8)
    return EncodedImage.encode(pixels, f"img{seed}")


def conversation(text: str = "cat", seed: int = 0) -> list[ChatMessage]:
    return [
        ChatMessage.text("system", "sys"),
        ChatMessage("user", (ImagePart(image(seed)), TextPart(text))),
    ]


TOOL = ToolSpec("report_no_mask", "Nothing matches.", {"type": "object", "properties": {}})


async def test_hit_is_cached_and_free(tmp_path: Path):
    inner = EchoModel()
    cache = CachedChatModel(inner, tmp_path / "c.sqlite")
    first = await cache.complete(conversation())
    second = await cache.complete(conversation())
    assert inner.calls == 1
    assert not first.cached and first.usage == TokenUsage(100, 10, 1)
    assert second.cached and second.usage == TokenUsage(0, 0, 0)
    assert (second.text, second.reasoning, second.finish_reason, second.tool_calls) == (
        first.text,
        first.reasoning,
        first.finish_reason,
        first.tool_calls,
    )
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)
    assert cache.stats.saved == TokenUsage(100, 10, 1)
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT prompt_tokens, completion_tokens FROM responses").fetchall() == [
            (100, 10)
        ]


async def test_cache_persists_across_instances(tmp_path: Path):
    path = tmp_path / "deep" / "dir" / "c.sqlite"
    await CachedChatModel(EchoModel(), path).complete(conversation())
    inner = EchoModel()
    response = await CachedChatModel(inner, path).complete(conversation())
    assert response.cached and inner.calls == 0


def test_images_are_keyed_by_content_not_identity():
    a = conversation(seed=1)
    same_bytes = conversation(seed=1)
    assert a[1].images[0] is not same_bytes[1].images[0]
    assert request_key(a, model="m") == request_key(same_bytes, model="m")
    assert request_key(a, model="m") != request_key(conversation(seed=2), model="m")


@pytest.mark.parametrize(
    "change",
    ["model", "text", "role", "image", "tools", "params", "image-order"],
)
def test_every_part_of_the_request_is_in_the_key(change: str):
    base: dict[str, Any] = {
        "model": "m",
        "messages": conversation(),
        "tools": None,
        "generation_params": {"temperature": 0.0},
    }
    other = dict(base)
    if change == "model":
        other["model"] = "m2"
    elif change == "text":
        other["messages"] = conversation("dog")
    elif change == "role":
        other["messages"] = [ChatMessage.text("user", "sys"), conversation()[1]]
    elif change == "image":
        other["messages"] = conversation(seed=5)
    elif change == "tools":
        other["tools"] = [TOOL]
    elif change == "params":
        other["generation_params"] = {"temperature": 0.7}
    elif change == "image-order":
        two = (ImagePart(image(1)), ImagePart(image(2)))
        base["messages"] = [ChatMessage("user", two)]
        other["messages"] = [ChatMessage("user", two[::-1])]
    assert request_key(**base) != request_key(**other)


async def test_generation_params_of_inner_model_change_the_key(tmp_path: Path):
    path = tmp_path / "c.sqlite"
    await CachedChatModel(EchoModel(), path).complete(conversation())
    hot = EchoModel(generation_params={"temperature": 1.0})
    await CachedChatModel(hot, path).complete(conversation())
    assert hot.calls == 1


async def test_replay_hit_and_miss(tmp_path: Path):
    path = tmp_path / "c.sqlite"
    await CachedChatModel(EchoModel(), path).complete(conversation("cat"), tools=[TOOL])
    inner = EchoModel()
    replay = CachedChatModel(inner, path, replay=True)
    assert (await replay.complete(conversation("cat"), tools=[TOOL])).cached
    with pytest.raises(ReplayMissError, match="without `replay=True`"):
        await replay.complete(conversation("dog"), tools=[TOOL])
    with pytest.raises(ReplayMissError):
        await replay.complete(conversation("cat"))
    assert inner.calls == 0


def test_replay_without_a_cache_file(tmp_path: Path):
    with pytest.raises(UserError, match="does not exist"):
        CachedChatModel(EchoModel(), tmp_path / "missing.sqlite", replay=True)


def test_unopenable_cache_is_a_user_error(tmp_path: Path):
    with pytest.raises(UserError, match="cannot open"):
        CachedChatModel(EchoModel(), tmp_path)


async def test_failures_are_not_cached(tmp_path: Path):
    path = tmp_path / "c.sqlite"
    with pytest.raises(ChatModelError):
        await CachedChatModel(EchoModel(fail=True), path).complete(conversation())
    inner = EchoModel()
    assert not (await CachedChatModel(inner, path).complete(conversation())).cached


def test_wal_mode(tmp_path: Path):
    CachedChatModel(EchoModel(), tmp_path / "c.sqlite")
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def write_many(path: str, worker: int, count: int) -> int:
    """One writer: ``count`` requests, half shared with every other writer. Returns misses."""
    cache = CachedChatModel(EchoModel(), path)

    async def run() -> None:
        await asyncio.gather(
            *(
                cache.complete(conversation(f"shared {i}" if i % 2 else f"w{worker} {i}"))
                for i in range(count)
            )
        )

    asyncio.run(run())
    return cache.stats.misses


def expected_texts(workers: int, count: int) -> set[str]:
    return {f"shared {i}" if i % 2 else f"w{w} {i}" for w in range(workers) for i in range(count)}


async def check_all_replayable(path: Path, texts: set[str]) -> None:
    replay = CachedChatModel(EchoModel(), path, replay=True)
    for text in sorted(texts):
        response = await replay.complete(conversation(text))
        assert response.cached and response.text == f"echo: {text}"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == len(texts)


async def test_concurrent_writer_threads(tmp_path: Path):
    path = tmp_path / "c.sqlite"
    workers, count = 6, 20
    errors: list[BaseException] = []

    def target(worker: int) -> None:
        try:
            write_many(str(path), worker, count)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=target, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    await check_all_replayable(path, expected_texts(workers, count))


async def test_concurrent_writer_processes(tmp_path: Path):
    path = tmp_path / "c.sqlite"
    workers, count = 3, 30
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers) as pool:
        misses = pool.starmap(write_many, [(str(path), w, count) for w in range(workers)])
    assert sum(misses) >= len(expected_texts(workers, count))
    # Keys computed in other processes match ours: everything replays here.
    await check_all_replayable(path, expected_texts(workers, count))


def test_locked_while_creating_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """SQLite may answer "database is locked" without waiting while another writer switches a
    fresh file to WAL; opening the cache waits and tries again instead of failing."""
    real_connect = sqlite3.connect
    refusals = {"left": 3}

    class LockedOnce:
        def __init__(self, db: sqlite3.Connection) -> None:
            self._db = db

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.startswith("PRAGMA journal_mode") and refusals["left"] > 0:
                refusals["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self._db.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self._db, name)

        def __enter__(self) -> LockedOnce:
            self._db.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self._db.__exit__(*exc)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: LockedOnce(real_connect(*a, **k)))
    CachedChatModel(EchoModel(), tmp_path / "c.sqlite")
    assert refusals["left"] == 0
    with real_connect(tmp_path / "c.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_other_errors_while_creating_are_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    calls = {"n": 0}

    def broken(*args: object, **kwargs: object) -> sqlite3.Connection:
        calls["n"] += 1
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sqlite3, "connect", broken)
    with pytest.raises(UserError, match="disk I/O error"):
        CachedChatModel(EchoModel(), tmp_path / "c.sqlite")
    assert calls["n"] == 1


def test_native_replays_are_in_the_key() -> None:
    call = NativeToolCall("segment_phrase", '{"text_prompt": "cat"}', id="call00001")
    replay = [
        *conversation(),
        ChatMessage("assistant", (), tool_calls=(call,)),
        ChatMessage("tool", (TextPart("3 masks"),), tool_call_id="call00001"),
    ]
    as_text = [
        *conversation(),
        ChatMessage("assistant", ()),
        ChatMessage("tool", (TextPart("3 masks"),)),
    ]
    other_id = [
        *replay[:2],
        ChatMessage(
            "assistant", (), tool_calls=(NativeToolCall(call.name, call.arguments, id="call00002"),)
        ),
        replay[3],
    ]
    keys = {request_key(m, model="m") for m in (replay, as_text, other_id)}
    assert len(keys) == 3


async def test_lone_surrogates_are_keyed_and_stored(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await CachedChatModel(EchoModel(), path).complete(conversation("dog \ud83d"))
    inner = EchoModel()
    response = await CachedChatModel(inner, path).complete(conversation("dog \ud83d"))
    assert response.cached and inner.calls == 0
    assert response.text == "echo: dog \ud83d"


def native_conversation() -> tuple[list[ChatMessage], list[ToolSpec]]:
    """A text-only request with a native tool-call replay (its key does not depend on PNG
    encoder bytes)."""
    call = NativeToolCall("segment_phrase", '{"text_prompt": "cat"}', id="call00001")
    messages = [
        ChatMessage.text("system", "sys"),
        ChatMessage.text("user", "find the cat \u00e9"),
        ChatMessage("assistant", (), tool_calls=(call,)),
        ChatMessage("tool", (TextPart("3 masks"),), tool_call_id="call00001"),
    ]
    return messages, [ToolSpec("segment_phrase", "Segment.", {"type": "object"})]


def test_the_key_of_stored_caches_is_unchanged() -> None:
    # Pinned: a cache recorded by an earlier version must still hit (replay promises zero
    # requests). A change here needs REQUEST_KEY_FORMAT bumped and the README told.
    messages, tools = native_conversation()
    key = request_key(messages, tools, model="m", generation_params={"temperature": 0.0})
    assert key == "3505941e6bf26b108da7522f54db64a470c32fdfb3b0ff99af3c403cfdb8c0de"


async def test_tool_call_ids_survive_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    response = ChatResponse("", tool_calls=(NativeToolCall("segment_phrase", "{}", id="c7"),))
    inner = ScriptedAnswer(response)
    await CachedChatModel(inner, path).complete(conversation())
    hit = await CachedChatModel(inner, path).complete(conversation())
    assert hit.cached and inner.calls == 1
    assert [c.id for c in hit.tool_calls] == ["c7"]


async def test_records_of_earlier_versions_still_read(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = CachedChatModel(EchoModel(), path)
    old_record = (
        '{"text": "old", "reasoning": null, "finish_reason": "stop", '
        '"tool_calls": [{"name": "segment_phrase", "arguments": "{}"}]}'
    )
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?)",
            (cache.key(conversation(), None), "echo", old_record, 5, 1, 0.0),
        )
    hit = await cache.complete(conversation())
    assert hit.cached and hit.text == "old" and hit.usage == TokenUsage(0, 0, 0)
    assert hit.tool_calls == (NativeToolCall("segment_phrase", "{}"),)
    assert cache.stats.saved == TokenUsage(5, 1, 1)


@dataclass
class ScriptedAnswer:
    """Answers every request with ``response``; counts calls."""

    response: ChatResponse
    name: str = "scripted"
    calls: int = 0

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        self.calls += 1
        return self.response


@dataclass
class Capable(EchoModel):
    """A model with every optional capability a chat model may declare."""

    tokenizer: str = "its tokenizer"
    closed: int = 0

    def describe(self) -> dict[str, Any]:
        return {"--llm": "capable"}

    async def aclose(self) -> None:
        self.closed += 1


async def test_every_wrapper_forwards_every_capability(tmp_path: Path) -> None:
    """Cache, journal and failover offer what the model they wrap offers: a wrapper does not
    switch a capability off (the journal over the cache once hid the tokenizer)."""
    inner = Capable()
    cached = CachedChatModel(inner, tmp_path / "c.sqlite")
    journaled = JournaledChatModel(cached, Journal(tmp_path / "calls.jsonl", 1, []))
    for wrapper in (cached, journaled, FailoverChatModel([journaled])):
        assert wrapper.name == "echo"
        assert generation_params(wrapper) == {"temperature": 0.0}
        assert describe_backend(wrapper) == {"--llm": "capable"}
        await close_backend(wrapper)
    assert inner.closed == 3
    assert tokenizer_of(cached) == tokenizer_of(journaled) == "its tokenizer"
    assert tokenizer_of(JournaledChatModel(EchoModel(), journaled._journal)) is None


class DictReplay(ReplayingChatModel):
    def __init__(self, inner: EchoModel) -> None:
        super().__init__(inner)
        self.answers: dict[str, ChatResponse] = {}

    async def recorded(self, key: str) -> ChatResponse | None:
        return self.answers.get(key)

    async def record(self, key: str, response: ChatResponse) -> None:
        self.answers[key] = response


async def test_one_replay_mechanism_keyed_alike_under_the_cache_and_the_journal(
    tmp_path: Path,
) -> None:
    inner = EchoModel()
    replay = DictReplay(inner)
    first = await replay.complete(conversation("cat"), tools=[TOOL])
    assert await replay.complete(conversation("cat"), tools=[TOOL]) == first
    assert inner.calls == 1
    cached = CachedChatModel(inner, tmp_path / "c.sqlite")
    journaled = JournaledChatModel(inner, Journal(tmp_path / "calls.jsonl", 1, []))
    assert isinstance(cached, ReplayingChatModel) and isinstance(journaled, ReplayingChatModel)
    keys = {m.key(conversation("cat"), [TOOL]) for m in (replay, cached, journaled)}
    assert keys == set(replay.answers)
