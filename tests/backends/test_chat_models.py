"""build_chat_model: which backend each combination of options gives, and which it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

from sam3_agent.backends import memory
from sam3_agent.backends.chat_models import (
    DEFAULT_HF_MODEL,
    ChatChoice,
    build_chat_model,
    check_chat_options,
)
from sam3_agent.backends.generation import GenerationSettings
from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.backends.openai_chat import OpenAIChatModel
from sam3_agent.backends.response_cache import CachedChatModel
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.errors import UserError
from sam3_agent.values.messages import ChatMessage


class Loaded:
    """What a stubbed TransformersChatModel.from_pretrained was asked to load."""

    def __init__(self, model_id_or_dir: str, **kwargs: Any) -> None:
        self.name = model_id_or_dir
        self.kwargs = kwargs


@pytest.fixture(autouse=True)
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TransformersChatModel, "from_pretrained", lambda m, **kw: Loaded(m, **kw))


@pytest.mark.parametrize(
    ("available_gb", "expected"),
    [(1000, "Qwen/Qwen3-VL-4B-Instruct"), (10, "Qwen/Qwen3-VL-2B-Instruct")],
)
def test_default_is_the_machines_default_model(
    loads: None, monkeypatch: pytest.MonkeyPatch, available_gb: int, expected: str
):
    reading = memory.MemoryReading("cpu", available_gb * 10**9, available_gb * 10**9)
    monkeypatch.setattr(memory, "read_memory", lambda device: reading)
    spec = BackendSpec(sam3_url="http://127.0.0.1:8100", device="cpu", dtype="bfloat16")
    built = spec.build_chat_model()  # the spec plans the default; build_chat_model cannot
    assert isinstance(built, Loaded)
    assert built.name == expected
    assert DEFAULT_HF_MODEL == "Qwen/Qwen3-VL-8B-Instruct"
    with pytest.raises(ValueError, match="BackendSpec"):
        build_chat_model(device="cpu", dtype="bfloat16")


def test_hf_prefix_loads_in_process(loads: None):
    built = build_chat_model(llm="hf:/models/qwen", device="cpu", dtype="float32")
    assert isinstance(built, Loaded)
    assert (built.name, built.kwargs) == (
        "/models/qwen",
        {"device": "cpu", "dtype": "float32", "generation": None},
    )


def test_url_and_model_give_an_endpoint():
    built = build_chat_model(
        url="http://127.0.0.1:8000/v1", model="qwen3-vl", api_key="k", timeout_s=7
    )
    assert isinstance(built, OpenAIChatModel)
    assert (built.name, built.endpoint, built.timeout_s) == (
        "qwen3-vl",
        "http://127.0.0.1:8000/v1",
        7.0,
    )


def test_endpoint_from_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8001/v1")
    built = build_chat_model(model="m", tool_protocol="native")
    assert isinstance(built, OpenAIChatModel)
    assert built.endpoint == "http://127.0.0.1:8001/v1"
    assert built.tool_protocol == "native"


def test_cache_wraps_and_replay_reads(tmp_path: Path):
    path = tmp_path / "cache.sqlite"
    built = build_chat_model(url="http://127.0.0.1:9/v1", model="m", cache=str(path))
    assert isinstance(built, CachedChatModel)
    assert isinstance(built.inner, OpenAIChatModel)
    assert built.name == "m" and not built.replay
    replaying = build_chat_model(
        url="http://127.0.0.1:9/v1", model="m", cache=str(path), replay=True
    )
    assert isinstance(replaying, CachedChatModel) and replaying.replay


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replay": True}, "`cache="),
        ({"replay": True, "cache": "/nonexistent/c.sqlite"}, "does not exist"),
        ({"llm": "hf:x", "url": "http://127.0.0.1:9/v1"}, "not both"),
        ({"llm": "hf:x", "model": "m"}, "`llm_model`"),
        ({"llm": "qwen"}, "hf:"),
        ({"llm": "hf:"}, "hf:"),
        ({"llm": "hf:x", "tool_protocol": "native"}, "tag protocol"),
        ({"tool_protocol": "native"}, "tag protocol"),
        ({"url": "http://127.0.0.1:9/v1"}, "`llm_model` is required"),
        ({"tool_protocol": "json"}, "`tool_protocol`"),
        ({"url": "localhost:8000/v1", "model": "m"}, "http"),
        ({"url": "http://127.0.0.1:9/v1", "model": "m", "timeout_s": float("nan")}, "timeout"),
        ({"url": "http://127.0.0.1:9/v1", "model": "m", "timeout_s": 0}, "timeout"),
        (
            {"generation": GenerationSettings(extra_body={"top_k": 3})},
            "only chat_template_kwargs",
        ),
    ],
)
def test_contradictory_options(loads: None, options: dict[str, Any], message: str):
    with pytest.raises(UserError, match=message):
        build_chat_model(**options)


async def test_hf_route_loads_a_real_directory(
    tmp_path: Path, tiny_qwen_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    built = build_chat_model(llm=f"hf:{tiny_qwen_dir}", device="cpu", cache=str(tmp_path / "c.db"))
    assert isinstance(built, CachedChatModel)
    assert isinstance(built.inner, TransformersChatModel)
    response = await built.complete([ChatMessage.text("user", "hi")])
    assert response.usage.calls == 1 and not response.cached


def test_check_chat_options_says_which_backend_and_loads_nothing(
    monkeypatch: pytest.MonkeyPatch,
):
    def no_load(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("checking options must not load a model")

    monkeypatch.setattr(TransformersChatModel, "from_pretrained", no_load)
    assert check_chat_options() == ChatChoice("hf", DEFAULT_HF_MODEL, default=True)
    assert check_chat_options(llm="hf:/m") == ChatChoice("hf", "/m")
    assert check_chat_options(url="http://h:1/v1", model="q") == ChatChoice(
        "endpoint", "q", "http://h:1/v1"
    )
    several = ["http://h:1/v1", "http://h:2/v1"]
    assert check_chat_options(url=several, model="q") == ChatChoice(
        "endpoint", "q", "http://h:1/v1", urls=tuple(several)
    )
    assert check_chat_options(url=["http://h:1/v1"], model="q").urls == ()
    with pytest.raises(UserError, match="http:// or https:// URL, got 'h:2'"):
        check_chat_options(url=["http://h:1/v1", "h:2"], model="q")


def test_generation_settings_reach_the_endpoint_model():
    settings = GenerationSettings(temperature=0.7, max_tokens=99, seed=5)
    built = build_chat_model(url="http://127.0.0.1:9/v1", model="m", generation=settings)
    assert isinstance(built, OpenAIChatModel)
    assert (built.temperature, built.max_tokens, built.generation.seed) == (0.7, 99, 5)
