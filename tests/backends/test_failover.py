"""FailoverChatModel over two scripted OpenAI-compatible servers, one of them killed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from sam3_agent.backends.chat_models import build_chat_model
from sam3_agent.backends.failover import FailoverChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.values.errors import ChatModelError, UserError
from sam3_agent.values.messages import ChatMessage, ChatResponse
from tests.support.fakes import ScriptedChatModel
from tests.support.openai_server import Reply, ScriptedServer, serve

HELLO = [ChatMessage.text("user", "hello")]


def _endpoint(server: ScriptedServer) -> OpenAIChatModel:
    return OpenAIChatModel(
        "test-vlm", base_url=server.base_url, api_key="k", timeout_s=5.0, max_retries=0
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


Servers = tuple[ScriptedServer, ScriptedServer, contextlib.ExitStack]


@pytest.fixture
def two_servers() -> Iterator[Servers]:
    """Two servers answering "a" and "b"; closing the stack's first entry kills server a."""
    with contextlib.ExitStack() as keep_b:
        b = keep_b.enter_context(serve(ScriptedServer(default=Reply(text="b"))))
        kill_a = contextlib.ExitStack()
        a = kill_a.enter_context(serve(ScriptedServer(default=Reply(text="a"))))
        try:
            yield a, b, kill_a
        finally:
            kill_a.close()


async def test_calls_are_spread_round_robin(two_servers: Servers) -> None:
    a, b, _ = two_servers
    chat = FailoverChatModel([_endpoint(a), _endpoint(b)])
    replies = [(await chat.complete(HELLO)).text for _ in range(6)]
    assert replies == ["a", "b"] * 3
    assert len(a.completions) == len(b.completions) == 3


async def test_a_killed_server_fails_over_and_is_tried_last(two_servers: Servers) -> None:
    a, b, kill_a = two_servers
    clock = Clock()
    chat = FailoverChatModel([_endpoint(a), _endpoint(b)], cooldown_s=30.0, clock=clock)
    assert (await chat.complete(HELLO)).text == "a"
    kill_a.close()  # server a is gone: connections are refused from now on
    replies = [(await chat.complete(HELLO)).text for _ in range(4)]
    assert replies == ["b"] * 4  # no call is lost
    assert chat.order() == [1, 0]  # a is down: tried last whatever the turn
    assert chat.order() == [1, 0]
    clock.now += 31  # the cooldown is over: a gets its turn again
    assert sorted(chat.order()) == [0, 1] and chat.order()[0] in (0, 1)


async def test_concurrent_calls_survive_a_kill(two_servers: Servers) -> None:
    a, b, kill_a = two_servers
    chat = FailoverChatModel([_endpoint(a), _endpoint(b)])
    kill_a.close()
    replies = await asyncio.gather(*(chat.complete(HELLO) for _ in range(8)))
    assert [r.text for r in replies] == ["b"] * 8
    assert len(b.completions) == 8


async def test_every_endpoint_down_is_one_chat_model_error(two_servers: Servers) -> None:
    a, b, kill_a = two_servers
    b.default = Reply.server_error(500)
    chat = FailoverChatModel([_endpoint(a), _endpoint(b)])
    kill_a.close()
    with pytest.raises(ChatModelError, match=r"all 2 MLLM endpoints failed; last: .*500"):
        await chat.complete(HELLO)


async def test_a_recovered_endpoint_is_used_again() -> None:
    flaky = ScriptedChatModel(replies=["one", "two", "three"], name="m")
    steady = ScriptedChatModel(replies=["s1", "s2"], name="m")
    broken = {"on": True}
    original = flaky.complete

    async def sometimes_down(messages: Any, *, tools: Any = None) -> ChatResponse:
        if broken["on"]:
            raise ChatModelError("down")
        return await original(messages, tools=tools)

    flaky.complete = sometimes_down  # type: ignore[method-assign]
    clock = Clock()
    chat = FailoverChatModel([flaky, steady], cooldown_s=10.0, clock=clock)
    assert (await chat.complete(HELLO)).text == "s1"  # flaky's turn, failed over
    broken["on"] = False
    clock.now += 11
    assert (await chat.complete(HELLO)).text == "s2"  # steady's turn
    assert (await chat.complete(HELLO)).text == "one"  # flaky is back in the rotation


def test_endpoints_must_serve_one_model() -> None:
    with pytest.raises(UserError, match="same model"):
        FailoverChatModel([ScriptedChatModel(name="a"), ScriptedChatModel(name="b")])
    with pytest.raises(UserError, match="at least one"):
        FailoverChatModel([])


def test_build_chat_model_with_several_urls() -> None:
    one = build_chat_model(url=["http://127.0.0.1:9/v1"], model="m", api_key="k")
    assert isinstance(one, OpenAIChatModel)
    both = build_chat_model(
        url=["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], model="m", api_key="k"
    )
    assert isinstance(both, FailoverChatModel)
    assert [m.endpoint for m in both.models] == [  # type: ignore[attr-defined]
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:10/v1",
    ]
    assert both.name == "m"
    with pytest.raises(UserError, match="`llm_model` is required"):
        build_chat_model(url=["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"])
