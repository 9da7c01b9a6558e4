"""TransformersChatModel with a tiny random-weight Qwen2.5-VL, offline, on the CPU.

The replies are gibberish: these tests check that images go in, text comes out, and tokens
are counted, never what the text says.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import numpy as np
import pytest
import torch

from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.backends.torch_runtime import (
    cpu_supports_bfloat16,
    resolve_device,
    resolve_dtype,
)
from sam3_agent.values.errors import UserError, WeightsUnavailableError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart, ToolSpec


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """Offline as HF_HUB_OFFLINE=1 makes it (the hub reads the variable at import)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def tiny_dir(tiny_qwen_dir: Path) -> Path:
    return tiny_qwen_dir


@pytest.fixture(scope="module")
def chat(tiny_dir: Path, offline: None) -> TransformersChatModel:
    return TransformersChatModel.from_pretrained(str(tiny_dir), device="cpu", max_new_tokens=8)


def image(seed: int, h: int = 60, w: int = 80) -> EncodedImage:
    pixels = np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)
    return EncodedImage.encode(pixels, f"img{seed}")


def conversation(*images: EncodedImage) -> list[ChatMessage]:
    return [
        ChatMessage.text("system", "You segment things."),
        ChatMessage("user", (*(ImagePart(i) for i in images), TextPart("the leftmost cat"))),
        ChatMessage.text("assistant", '<tool>{"name": "report_no_mask", "parameters": {}}</tool>'),
        ChatMessage.text("user", "Try again."),
    ]


async def test_images_in_text_out(chat: TransformersChatModel, tiny_dir: Path):
    response = await chat.complete(conversation(image(0)))
    assert isinstance(response.text, str)
    assert response.usage.calls == 1
    assert 1 <= response.usage.completion_tokens <= 8
    assert response.finish_reason in ("stop", "length")
    assert chat.name == str(tiny_dir)


async def test_prompt_tokens_grow_with_images(chat: TransformersChatModel):
    text_only = await chat.complete(conversation())
    one = await chat.complete(conversation(image(1)))
    two = await chat.complete(conversation(image(1), image(2, 112, 112)))
    assert text_only.usage.prompt_tokens < one.usage.prompt_tokens < two.usage.prompt_tokens


async def test_images_reach_the_vision_tower(
    chat: TransformersChatModel, monkeypatch: pytest.MonkeyPatch
):
    seen: list[dict[str, Any]] = []
    generate = chat._model.generate

    def spy(**inputs: Any) -> Any:
        seen.append(inputs)
        return generate(**inputs)

    monkeypatch.setattr(chat._model, "generate", spy)
    await chat.complete(conversation(image(3), image(4)))
    (inputs,) = seen
    assert inputs["image_grid_thw"].shape[0] == 2
    assert inputs["pixel_values"].shape[0] > 0


async def test_token_limit_reports_length(tiny_dir: Path, offline: None):
    short = TransformersChatModel.from_pretrained(str(tiny_dir), device="cpu", max_new_tokens=2)
    response = await short.complete(conversation(image(5)))
    assert response.usage.completion_tokens == 2
    assert response.finish_reason == "length"


async def test_generate_runs_off_the_event_loop_one_at_a_time(
    chat: TransformersChatModel, monkeypatch: pytest.MonkeyPatch
):
    threads: list[int] = []
    active: list[int] = []
    peak: list[int] = [0]
    generate = chat._model.generate

    def spy(**inputs: Any) -> Any:
        threads.append(threading.get_ident())
        active.append(1)
        peak[0] = max(peak[0], len(active))
        try:
            return generate(**inputs)
        finally:
            active.pop()

    monkeypatch.setattr(chat._model, "generate", spy)
    replies = await asyncio.gather(*(chat.complete(conversation(image(i))) for i in range(3)))
    assert len(replies) == 3
    assert threading.get_ident() not in threads
    assert peak[0] == 1


async def test_native_tools_are_refused(chat: TransformersChatModel):
    with pytest.raises(UserError, match="`tool_protocol='tags'`"):
        await chat.complete(conversation(), tools=[ToolSpec("t", "d", {"type": "object"})])


def test_missing_hub_weights_offline(offline: None, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(WeightsUnavailableError, match="hf download"):
        TransformersChatModel.from_pretrained("sam3-agent-tests/no-such-model", device="cpu")


def test_missing_directory(offline: None, tmp_path: Path):
    with pytest.raises(WeightsUnavailableError, match="no model directory"):
        TransformersChatModel.from_pretrained(str(tmp_path / "nowhere"), device="cpu")


def test_directory_without_a_model(offline: None, tmp_path: Path):
    with pytest.raises(WeightsUnavailableError):
        TransformersChatModel.from_pretrained(str(tmp_path), device="cpu")


@pytest.mark.parametrize(
    ("device", "dtype", "expected"),
    [
        ("cpu", "auto", torch.bfloat16 if cpu_supports_bfloat16() else torch.float32),
        ("cpu", "bfloat16", torch.bfloat16),
    ],
)
def test_dtype_resolution(device: str, dtype: str, expected: torch.dtype):
    assert resolve_dtype(dtype, resolve_device(device)) == expected


@pytest.mark.parametrize(("device", "dtype"), [("toaster", "auto"), ("cpu", "float8")])
def test_bad_device_or_dtype(device: str, dtype: str):
    with pytest.raises(UserError):
        resolve_dtype(dtype, resolve_device(device))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
async def test_cuda_bfloat16(tiny_dir: Path, offline: None):
    on_gpu = TransformersChatModel.from_pretrained(str(tiny_dir), device="cuda", max_new_tokens=4)
    assert on_gpu._model.device.type == "cuda"
    assert on_gpu._model.dtype == torch.bfloat16
    response = await on_gpu.complete(conversation(image(6)))
    assert response.usage.completion_tokens >= 1
