"""The attention policy with the in-process transformers MLLM (tiny random Qwen2.5-VL)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest

from sam3_agent.agent.context.attention import AttentionPolicy
from sam3_agent.agent.context.tokens import counter_for
from sam3_agent.agent.context.types import Budget, History
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart
from tests.support.context_histories import Spec, history
from tests.support.fakes import FakeSegmenter, ScriptedChatModel


@pytest.fixture(scope="module")
def chat(tiny_qwen_dir: Path) -> Iterator[TransformersChatModel]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield TransformersChatModel.from_pretrained(
            str(tiny_qwen_dir), device="cpu", max_new_tokens=4
        )


def small_image(seed: int) -> EncodedImage:
    pixels = np.random.default_rng(seed).integers(0, 255, (56, 56, 3), dtype=np.uint8)
    return EncodedImage.encode(pixels, f"img{seed}")


def test_the_model_reports_attention_per_message(chat: TransformersChatModel) -> None:
    chat.record_attention()
    messages = [
        ChatMessage.text("system", "You segment things."),
        ChatMessage("user", (ImagePart(small_image(1)), TextPart("the leftmost cat"))),
        ChatMessage.text("assistant", "trying"),
        ChatMessage.text("user", "Try again."),
    ]
    asyncio.run(chat.complete(messages))
    shares = chat.last_message_attention(messages)
    assert shares is not None and len(shares) == 4
    assert sum(shares) == pytest.approx(1.0)
    assert all(s >= 0 for s in shares)
    assert chat.last_message_attention([ChatMessage.text("user", "never sent")]) is None


def test_policy_learns_from_the_model_attention(chat: TransformersChatModel) -> None:
    policy = AttentionPolicy(Budget(32768), counter_for(chat), chat, window=2)
    # A short system prompt: the tokenizer is byte-level, every character is a token.
    full = history([Spec("segment", True, 2)], side=56)
    context = asyncio.run(policy.build(History("Segment.", full.task, full.steps)))
    asyncio.run(chat.complete(context.messages))
    asyncio.run(policy.build(History("Segment.", full.task, full.steps)))  # reads the attention
    assert set(policy.masses) == {1}  # round 1 was shown to (and attended by) the model
    assert 0.0 <= policy.smoothed(1) <= 1.0


def test_text_is_counted_with_the_model_tokenizer(chat: TransformersChatModel) -> None:
    counter = counter_for(chat)
    assert counter.source.startswith("tokenizer:")
    text = "the leftmost cat"
    assert counter.text(text) == len(chat.tokenizer.encode(text, add_special_tokens=False))


def test_other_backends_are_refused_at_start_up() -> None:
    with pytest.raises(UserError, match="needs the in-process transformers MLLM"):
        Sam3Agent(FakeSegmenter(), ScriptedChatModel(), AgentConfig(context_policy="attention"))
