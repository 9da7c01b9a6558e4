"""Generation settings: validated once, carried in the endpoint's request body, honoured by
the in-process model, and part of every response-cache key."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.backends.generation import GenerationSettings, parse_extra_body
from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.backends.response_cache import CachedChatModel
from sam3_agent.values.errors import UserError
from sam3_agent.values.messages import ChatMessage
from tests.support.openai_server import Reply, ScriptedServer, serve

THINKING = {"chat_template_kwargs": {"enable_thinking": True}}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        yield state


def conversation() -> list[ChatMessage]:
    return [ChatMessage.text("system", "You segment things."), ChatMessage.text("user", "cat")]


@given(
    temperature=st.one_of(
        st.just(math.nan), st.floats(max_value=-1e-9), st.floats(min_value=2.0001)
    ),
)
def test_temperature_out_of_range_is_refused(temperature: float) -> None:
    with pytest.raises(UserError, match="`temperature`"):
        GenerationSettings(temperature=temperature)


@given(text=st.text(max_size=40))
def test_extra_body_is_a_json_object_or_a_user_error(text: str) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and not (
        "chat_template_kwargs" in value and not isinstance(value["chat_template_kwargs"], dict)
    ):
        assert parse_extra_body(text) == value
    else:
        with pytest.raises(UserError, match="`llm_extra`"):
            parse_extra_body(text)


def test_huge_or_deep_extra_body_is_refused() -> None:
    with pytest.raises(UserError, match="`llm_extra`"):
        parse_extra_body("[" * 5000 + "]" * 5000)
    with pytest.raises(UserError, match="`llm_extra`"):
        parse_extra_body('{"a": "' + "x" * 70_000 + '"}')


async def test_the_request_body_carries_every_setting(server: ScriptedServer) -> None:
    server.script = [Reply(text="ok")]
    settings = GenerationSettings(temperature=0.6, max_tokens=77, seed=42, extra_body=THINKING)
    async with OpenAIChatModel(
        "m", base_url=server.base_url, api_key="k", generation=settings
    ) as model:
        await model.complete(conversation())
    (request,) = server.completions
    body = request.body
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.6, 77, 42)
    assert body["chat_template_kwargs"] == {"enable_thinking": True}


async def test_without_settings_the_body_has_no_seed_or_extras(server: ScriptedServer) -> None:
    async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model:
        await model.complete(conversation())
    body = server.completions[0].body
    assert "seed" not in body and "chat_template_kwargs" not in body
    assert (body["temperature"], body["max_tokens"]) == (0.0, 4096)


@pytest.mark.parametrize(
    "other",
    [
        GenerationSettings(seed=1),
        GenerationSettings(seed=2, temperature=0.5),
        GenerationSettings(max_tokens=10),
        GenerationSettings(extra_body=THINKING),
        GenerationSettings(extra_body={"chat_template_kwargs": {"enable_thinking": False}}),
    ],
)
def test_cache_keys_differ_with_the_settings(tmp_path: Path, other: GenerationSettings) -> None:
    def key(settings: GenerationSettings | None) -> str:
        inner = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", generation=settings)
        return CachedChatModel(inner, tmp_path / "c.sqlite").key(conversation(), None)

    assert key(other) != key(None)
    assert key(other) == key(GenerationSettings(**other.__dict__))


def test_cache_keys_without_settings_are_those_of_before() -> None:
    """Caches recorded before these flags existed still answer (no new key fields)."""
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    assert model.generation_params == {
        "max_tokens": 4096,
        "temperature": 0.0,
        "tool_protocol": "tags",
    }


@pytest.fixture(scope="module")
def tiny_dir(tiny_qwen_dir: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield tiny_qwen_dir


async def test_in_process_seed_makes_sampling_repeatable(tiny_dir: Path) -> None:
    def load(seed: int) -> TransformersChatModel:
        settings = GenerationSettings(temperature=1.0, max_tokens=12, seed=seed)
        return TransformersChatModel.from_pretrained(
            str(tiny_dir), device="cpu", generation=settings
        )

    model = load(7)
    first = await model.complete(conversation())
    again = await model.complete(conversation())
    assert first.text == again.text
    assert model.generation_params["seed"] == 7 and model.temperature == 1.0
    assert model.max_new_tokens == 12


async def test_in_process_chat_template_kwargs_reach_the_template(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = GenerationSettings(max_tokens=2, extra_body=THINKING)
    model = TransformersChatModel.from_pretrained(str(tiny_dir), device="cpu", generation=settings)
    seen: dict[str, Any] = {}
    template = model._processor.apply_chat_template

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return template(*args, **kwargs)

    monkeypatch.setattr(model._processor, "apply_chat_template", spy)
    await model.complete(conversation())
    assert seen["enable_thinking"] is True
