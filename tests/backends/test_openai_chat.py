"""OpenAIChatModel against the scripted server on 127.0.0.1: faults, retries, concurrency."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

import sam3_agent.values.images as images_module
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.backends.retry import RetryPolicy
from sam3_agent.values.errors import ChatModelError, UserError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import (
    ChatMessage,
    ImagePart,
    NativeToolCall,
    Part,
    TextPart,
    TokenUsage,
    ToolSpec,
)
from tests.support.openai_server import Rendezvous, Reply, ScriptedServer, serve


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        yield state


class RecordingSleep:
    """Stands in for asyncio.sleep between retries: records each wait, waits for nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def model(server: ScriptedServer, sleep: RecordingSleep) -> AsyncIterator[OpenAIChatModel]:
    chat = OpenAIChatModel(
        "test-vlm",
        base_url=server.base_url,
        api_key="sk-test",
        timeout_s=5.0,
        max_retries=3,
        backoff_base_s=0.01,
        backoff_cap_s=0.05,
        sleep=sleep,
        seed=0,
    )
    yield chat
    await chat.aclose()


def image(seed: int = 0) -> EncodedImage:
    pixels = np.random.default_rng(seed).integers(0, 255, (24, 32, 3), dtype=np.uint8)
    return EncodedImage.encode(pixels, f"img{seed}")


def conversation(*images: EncodedImage, text: str = "Segment the cat.") -> list[ChatMessage]:
    parts: tuple[Part, ...] = (*(ImagePart(i) for i in images), TextPart(text))
    return [ChatMessage.text("system", "You segment things."), ChatMessage("user", parts)]


async def test_reply_text_usage_and_finish_reason(model: OpenAIChatModel, server: ScriptedServer):
    server.script = [Reply(text="<tool>{}</tool>", usage=(1234, 56))]
    response = await model.complete(conversation())
    assert response.text == "<tool>{}</tool>"
    assert response.usage == TokenUsage(prompt_tokens=1234, completion_tokens=56, calls=1)
    assert response.finish_reason == "stop"
    assert response.reasoning is None
    assert response.tool_calls == ()
    assert not response.cached
    (request,) = server.completions
    assert request.body["model"] == "test-vlm"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["messages"][0] == {"role": "system", "content": "You segment things."}


async def test_missing_usage_counts_the_call(model: OpenAIChatModel, server: ScriptedServer):
    server.script = [Reply(usage=None)]
    response = await model.complete(conversation())
    assert response.usage == TokenUsage(0, 0, 1)


async def test_images_arrive_as_data_urls_in_order(model: OpenAIChatModel, server: ScriptedServer):
    first, second = image(1), image(2)
    await model.complete(conversation(first, second, text="which?"))
    content = server.completions[0].body["messages"][1]["content"]
    assert [part["type"] for part in content] == ["image_url", "image_url", "text"]
    assert content[0]["image_url"]["url"] == first.data_url()
    assert content[1]["image_url"]["url"] == second.data_url()
    assert content[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert content[2] == {"type": "text", "text": "which?"}


async def test_each_image_is_base64_encoded_once(
    model: OpenAIChatModel, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
):
    encoded: list[int] = []
    original = images_module.base64.b64encode

    def counting(data: bytes) -> bytes:
        encoded.append(len(data))
        return original(data)

    monkeypatch.setattr(images_module.base64, "b64encode", counting)
    raw, render = image(1), image(2)
    for _ in range(3):
        await model.complete(conversation(raw, render))
    await asyncio.gather(*(model.complete(conversation(raw)) for _ in range(4)))
    assert sorted(encoded) == sorted([len(raw.data), len(render.data)])
    assert len(server.completions) == 7


async def test_reasoning_content_is_separate(model: OpenAIChatModel, server: ScriptedServer):
    server.script = [
        Reply(text="<tool>{}</tool>", reasoning="The cat is on the left."),
        Reply(
            text="done", reasoning="Other servers call it reasoning.", reasoning_field="reasoning"
        ),
    ]
    first = await model.complete(conversation())
    second = await model.complete(conversation())
    assert (first.text, first.reasoning) == ("<tool>{}</tool>", "The cat is on the left.")
    assert second.reasoning == "Other servers call it reasoning."


async def test_truncated_reply_reports_length(model: OpenAIChatModel, server: ScriptedServer):
    server.script = [Reply.truncated("<think>The leftmost")]
    response = await model.complete(conversation())
    assert response.finish_reason == "length"
    assert response.text == "<think>The leftmost"


async def test_generation_parameters_are_sent(server: ScriptedServer):
    chat = OpenAIChatModel("m", base_url=server.base_url, max_tokens=321, temperature=0.7)
    bare = OpenAIChatModel("m", base_url=server.base_url, max_tokens=None, temperature=None)
    try:
        await chat.complete(conversation())
        await bare.complete(conversation())
    finally:
        await chat.aclose()
        await bare.aclose()
    sent, unset = (r.body for r in server.completions)
    assert (sent["max_tokens"], sent["temperature"]) == (321, 0.7)
    assert "max_tokens" not in unset and "temperature" not in unset


TOOLS = [
    ToolSpec(
        name="segment_phrase",
        description="Segment a short noun phrase.",
        parameters={
            "type": "object",
            "properties": {"text_prompt": {"type": "string"}},
            "required": ["text_prompt"],
        },
    ),
    ToolSpec("report_no_mask", "Nothing matches.", {"type": "object", "properties": {}}),
]


async def test_native_tools_sent_and_calls_returned(server: ScriptedServer):
    args = json.dumps({"text_prompt": "cat"})
    server.script = [Reply(text="", tool_calls=(("segment_phrase", args),))]
    chat = OpenAIChatModel("m", base_url=server.base_url, tool_protocol="native")
    try:
        response = await chat.complete(conversation(), tools=TOOLS)
    finally:
        await chat.aclose()
    assert response.tool_calls == (NativeToolCall("segment_phrase", args),)
    assert response.finish_reason == "tool_calls"
    assert response.text == ""
    sent = server.completions[0].body["tools"]
    assert [t["function"]["name"] for t in sent] == ["segment_phrase", "report_no_mask"]
    assert sent[0] == {
        "type": "function",
        "function": {
            "name": "segment_phrase",
            "description": TOOLS[0].description,
            "parameters": TOOLS[0].parameters,
        },
    }


async def test_tag_protocol_sends_no_tools(model: OpenAIChatModel, server: ScriptedServer):
    await model.complete(conversation(), tools=TOOLS)
    assert "tools" not in server.completions[0].body


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Reply.rate_limited(retry_after=None), id="429"),
        pytest.param(Reply.server_error(500), id="500"),
        pytest.param(Reply.server_error(503), id="503"),
        pytest.param(Reply.dropped(), id="dropped-connection"),
        pytest.param(Reply.hang(3.0), id="timeout"),
    ],
)
async def test_transient_faults_are_retried(
    server: ScriptedServer, sleep: RecordingSleep, fault: Reply
):
    server.script = [fault, fault, Reply(text="finally")]
    chat = OpenAIChatModel(
        "m",
        base_url=server.base_url,
        timeout_s=0.3,
        max_retries=3,
        backoff_base_s=0.01,
        backoff_cap_s=0.05,
        sleep=sleep,
    )
    try:
        response = await chat.complete(conversation())
    finally:
        await chat.aclose()
    assert response.text == "finally"
    assert len(sleep.waits) == 2
    assert len(server.script) == 0


async def test_retry_after_is_honoured(model: OpenAIChatModel, server: ScriptedServer, sleep):
    server.script = [Reply.rate_limited(retry_after="7"), Reply.rate_limited("0.25"), Reply()]
    await model.complete(conversation())
    assert sleep.waits == [7.0, 0.25]


async def test_backoff_grows_and_is_capped(server: ScriptedServer, sleep: RecordingSleep):
    server.script = [Reply.server_error()] * 6 + [Reply()]
    chat = OpenAIChatModel(
        "m",
        base_url=server.base_url,
        max_retries=6,
        backoff_base_s=1.0,
        backoff_cap_s=4.0,
        sleep=sleep,
        seed=1,
    )
    try:
        await chat.complete(conversation())
    finally:
        await chat.aclose()
    ceilings = [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert len(sleep.waits) == 6
    for wait, ceiling in zip(sleep.waits, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (Reply.server_error(502), "HTTP 502"),
        (Reply.rate_limited(), "HTTP 429"),
        (Reply.dropped(), "connection failed"),
        (Reply.hang(3.0), "timeout"),
    ],
    ids=["502", "429", "dropped", "timeout"],
)
async def test_retries_exhausted_raise_chat_model_error(
    server: ScriptedServer, sleep: RecordingSleep, fault: Reply, expected: str
):
    server.default = fault
    chat = OpenAIChatModel(
        "vlm-x",
        base_url=server.base_url,
        timeout_s=0.2,
        max_retries=2,
        sleep=sleep,
        backoff_base_s=0.01,
    )
    try:
        with pytest.raises(ChatModelError) as info:
            await chat.complete(conversation())
    finally:
        await chat.aclose()
    message = str(info.value)
    assert server.base_url in message
    assert "vlm-x" in message
    assert "3 times" in message
    assert expected in message
    assert info.value.__cause__ is not None
    assert len(sleep.waits) == 2


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "API key"), (400, "refused"), (404, "`llm_model`"), (422, "HTTP 422")],
)
async def test_client_errors_fail_at_once(
    model: OpenAIChatModel, server: ScriptedServer, sleep, status: int, hint: str
):
    server.script = [Reply.server_error(status), Reply(text="never reached")]
    with pytest.raises(ChatModelError) as info:
        await model.complete(conversation())
    assert f"HTTP {status}" in str(info.value)
    assert hint in str(info.value)
    assert server.base_url in str(info.value)
    assert len(server.completions) == 1
    assert sleep.waits == []


async def test_concurrent_calls_overlap(model: OpenAIChatModel, server: ScriptedServer):
    server.rendezvous = Rendezvous(8)  # answers only once all eight are in flight
    replies = await asyncio.gather(
        *(model.complete(conversation(text=f"mask {i}")) for i in range(8))
    )
    assert len(replies) == 8
    assert server.rendezvous.met


async def test_one_client_per_instance(model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch):
    import openai

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a new client was built for a request")

    monkeypatch.setattr(openai, "AsyncOpenAI", forbidden)
    for _ in range(2):
        await model.complete(conversation())


def test_one_event_loop_after_another(server: ScriptedServer):
    """Sam3Agent.run uses asyncio.run per request: a closed loop's pool must not be reused."""
    chat = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
    for i in range(3):
        server.script = [Reply(text=f"run {i}")]
        assert asyncio.run(chat.complete(conversation())).text == f"run {i}"


def test_environment_fallbacks(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    chat = OpenAIChatModel("m")
    assert chat.endpoint == "http://127.0.0.1:9/v1"
    assert chat._client.api_key == "sk-env"


@pytest.mark.parametrize(
    "kwargs",
    [{"tool_protocol": "xml"}, {"timeout_s": 0}, {"max_retries": -1}, {"model": ""}],
)
def test_bad_options_are_user_errors(kwargs: dict[str, object]):
    options: dict[str, object] = {"model": "m", "base_url": "http://127.0.0.1:9/v1", **kwargs}
    with pytest.raises(UserError):
        OpenAIChatModel(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("retry", "retry_after", "low", "high"),
    [
        (1, None, 0.25, 0.5),
        (3, None, 1.0, 2.0),
        (10, None, 5.0, 10.0),
        (1, 3.0, 3.0, 3.0),
        (1, -1.0, 0.0, 0.0),
        (1, 1e6, 120.0, 120.0),
    ],
)
def test_retry_policy_delay(retry: int, retry_after: float | None, low: float, high: float):
    policy = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=10.0, max_retry_after_s=120.0)
    rng = random.Random(0)
    for _ in range(20):
        assert low <= policy.delay(retry, retry_after, rng) <= high


def test_native_calls_are_replayed_as_tool_messages(server: ScriptedServer) -> None:
    """The whole agent against the server: earlier calls go back as structured assistant
    tool calls answered by ``tool`` messages, images in a user message after them."""
    from sam3_agent.agent.loop import Sam3Agent
    from sam3_agent.values.config import AgentConfig
    from sam3_agent.values.detections import Detections
    from tests.support.fakes import FakeSegmenter, square_mask

    height, width = 120, 160
    cats = Detections.from_masks(
        np.stack([square_mask(height, width, 10, 10, 30), square_mask(height, width, 60, 90, 30)]),
        [0.9, 0.8],
    )
    server.script = [
        Reply(
            text="<think>look</think>", tool_calls=(("segment_phrase", '{"text_prompt": "cat"}'),)
        ),
        Reply(text="", tool_calls=(("select_masks_and_return", '{"final_answer_masks": [9]}'),)),
        Reply(text="", tool_calls=(("select_masks_and_return", '{"final_answer_masks": [1]}'),)),
    ]
    chat = OpenAIChatModel("m", base_url=server.base_url, tool_protocol="native")
    agent = Sam3Agent(FakeSegmenter({"cat": cats}), chat, AgentConfig(tool_protocol="native"))
    image = np.zeros((height, width, 3), dtype=np.uint8)
    assert agent.run(image, "the cat \ud83d").status == "masks"

    messages = server.completions[2].body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    first_call = messages[2]
    assert first_call["content"] == "<think>look</think>"
    (call,) = first_call["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"] == {"name": "segment_phrase", "arguments": '{"text_prompt": "cat"}'}
    assert messages[3]["tool_call_id"] == call["id"]
    assert isinstance(messages[3]["content"], str) and "2 masks" in messages[3]["content"]
    assert [p["type"] for p in messages[4]["content"]] == ["image_url", "text"]
    assert messages[5]["content"] is None
    second = messages[5]["tool_calls"][0]
    assert second["id"] != call["id"] and messages[6]["tool_call_id"] == second["id"]
    assert "do not exist" in messages[6]["content"] or "does not exist" in messages[6]["content"]
    # The user's lone surrogate went out as U+FFFD (the request body must be UTF-8).
    assert "\ufffd" in json.dumps(messages[1], ensure_ascii=False)
