"""Whatever goes wrong while a chat backend serves a request, the caller gets one
``ChatModelError`` with a one-line message: never a library exception."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.values.errors import ChatModelError
from sam3_agent.values.messages import ChatMessage
from tests.support.openai_server import Reply, ScriptedServer, serve


def conversation() -> list[ChatMessage]:
    return [ChatMessage.text("system", "s"), ChatMessage.text("user", "cat")]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        yield state


@pytest.mark.parametrize(
    "failure",
    [
        KeyError("choices"),
        TypeError("'NoneType' object is not iterable"),
        RuntimeError("first line\nsecond line\n  third"),
        ValueError(""),
    ],
)
async def test_any_failure_at_the_endpoint_is_one_chat_model_error(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    server.script = [Reply(text="ok")]
    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")

    def broken(completion: Any) -> None:
        raise failure

    monkeypatch.setattr(model, "_response", broken)
    with pytest.raises(ChatModelError) as caught:
        await model.complete(conversation())
    message = str(caught.value)
    assert "\n" not in message and type(failure).__name__ in message
    assert caught.value.__cause__ is failure
    await model.aclose()


async def test_a_multi_line_server_error_becomes_one_line(server: ScriptedServer) -> None:
    server.responder = lambda body: Reply(status=400)
    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(ChatModelError) as caught:
        await model.complete(conversation())
    assert "\n" not in str(caught.value) and "HTTP 400" in str(caught.value)
    await model.aclose()


REASON = "The prompt has 4366 tokens, but the model takes at most 4096"


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": REASON, "type": "invalid_request_error"}},  # OpenAI's
        {"detail": REASON},  # FastAPI's (transformers serve)
        {"error": REASON},
    ],
)
async def test_the_servers_reason_for_a_refusal_is_in_the_error(
    server: ScriptedServer, body: dict[str, Any]
) -> None:
    server.responder = lambda request: Reply(status=400, error_body=body)
    model = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(ChatModelError) as caught:
        await model.complete(conversation())
    assert f"HTTP 400: {REASON} - the endpoint refused the request" in str(caught.value)
    await model.aclose()


@pytest.fixture(scope="module")
def tiny_model(tiny_qwen_dir: Path) -> Iterator[TransformersChatModel]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield TransformersChatModel.from_pretrained(
            str(tiny_qwen_dir), device="cpu", max_new_tokens=2
        )


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("CUDA out of memory.\nTried to allocate 2.00 GiB"),
        ValueError("Image features and image tokens do not match"),
        IndexError("index out of range in self"),
    ],
)
async def test_any_failure_in_process_is_one_chat_model_error(
    tiny_model: TransformersChatModel, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def broken(**kwargs: Any) -> None:
        raise failure

    monkeypatch.setattr(tiny_model._model, "generate", broken)
    with pytest.raises(ChatModelError) as caught:
        await tiny_model.complete(conversation())
    assert "\n" not in str(caught.value) and type(failure).__name__ in str(caught.value)
    assert caught.value.__cause__ is failure
