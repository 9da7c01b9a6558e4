"""Token accounting: the Qwen-VL image rules, the text estimate, the tokenizer lookup."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.agent.checkpoint.journal import Journal, JournaledChatModel
from sam3_agent.agent.context.tokens import (
    IMAGE_MARKERS,
    MESSAGE_OVERHEAD,
    QWEN3_CELL,
    TOOL_CALL_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    TokenCounter,
    counter_for,
    image_cell_for,
    qwen_image_tokens,
)
from sam3_agent.backends.response_cache import CachedChatModel
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, NativeToolCall, TextPart


@pytest.mark.parametrize(
    ("height", "width", "tokens"),
    [
        (1008, 1008, 1296),  # what the original pays per 1008² image
        (2000, 3000, 7597),
        (3024, 4032, 15552),
        (683, 1024, 37 * 24),  # a 1,024 px photo as sent: 896 tokens
        (10, 10, 4),  # tiny images are scaled up to the processor's minimum (56x56)
    ],
)
def test_qwen25_rule(height: int, width: int, tokens: int) -> None:
    assert qwen_image_tokens(height, width) == tokens


def test_qwen3_uses_32_pixel_cells() -> None:
    assert image_cell_for("Qwen/Qwen3-VL-8B-Instruct") == QWEN3_CELL
    assert image_cell_for("Qwen/Qwen2.5-VL-7B-Instruct") == 28
    assert image_cell_for("gpt-4o") == 28  # the documented fallback
    assert qwen_image_tokens(1024, 1024, QWEN3_CELL) == 32 * 32


@given(st.integers(1, 20000), st.integers(1, 20000))
def test_image_tokens_stay_within_the_processor_bounds(height: int, width: int) -> None:
    tokens = qwen_image_tokens(height, width)
    assert 1 <= tokens <= 16384


def test_text_estimate_and_message_overhead() -> None:
    counter = TokenCounter()
    assert counter.text("") == 0
    assert counter.text("abcd" * 10) == 10
    assert counter.text("é") == math.ceil(2 / 4)  # bytes, not characters
    image = EncodedImage(name="x.jpg", data=b"x", mime="image/jpeg", width=1008, height=1008)
    message = ChatMessage("user", (ImagePart(image), TextPart("abcd" * 3)))
    tokens = counter.message(message)
    assert tokens.image == 1296 + IMAGE_MARKERS
    assert tokens.text == 3 + MESSAGE_OVERHEAD
    assert counter.per_message([message, message]) == [tokens.total, tokens.total]


def test_lone_surrogates_are_counted_not_raised() -> None:
    assert TokenCounter().text("ab\ud83d") == math.ceil(5 / 4)  # a surrogate is 3 bytes

    def strict_len(text: str) -> int:  # like a tokenizer: valid UTF-8 only
        return len(text.encode("utf-8"))

    assert TokenCounter(encode_len=strict_len).text("ab\ud83d") == 3


def test_native_tool_calls_and_results_are_counted() -> None:
    counter = TokenCounter()
    call = NativeToolCall("abcd" * 2, '{"a": 1}', id="call00001")  # 8 bytes each: 2 + 2
    assistant = ChatMessage("assistant", (), tool_calls=(call,))
    assert counter.message(assistant).text == MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD + 2 + 2
    result = ChatMessage("tool", (TextPart("abcd"),), tool_call_id="call00001")
    assert counter.message(result).text == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + 1


class _Tokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(range(len(text.split())))


class _ModelWithTokenizer:
    name = "Qwen/Qwen3-VL-8B-Instruct"
    tokenizer = _Tokenizer()


class _Endpoint:
    name = "some-hosted-model"


def test_counter_uses_the_model_tokenizer_when_there_is_one() -> None:
    counter = counter_for(_ModelWithTokenizer())
    assert counter.source == "tokenizer:Qwen/Qwen3-VL-8B-Instruct"
    assert counter.text("one two three") == 3
    assert counter.image_cell == QWEN3_CELL


def test_counter_finds_the_tokenizer_behind_the_response_cache(tmp_path: Path) -> None:
    cached = CachedChatModel(_ModelWithTokenizer(), tmp_path / "c.sqlite")
    journaled = JournaledChatModel(cached, Journal(tmp_path / "calls.jsonl", 1, []))
    for wrapped in (cached, journaled):
        counter = counter_for(wrapped)
        assert counter.source == "tokenizer:Qwen/Qwen3-VL-8B-Instruct"
        assert counter.text("one two three four five") == 5  # the estimate says 6


def test_counter_falls_back_to_the_estimate_offline() -> None:
    counter = counter_for(_Endpoint())
    assert counter.source == "estimate"
    assert counter.text("abcdefgh") == 2


def test_counter_reads_a_tokenizer_from_the_local_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.tiny_qwen import build_tokenizer

    build_tokenizer().save_pretrained(tmp_path)
    found = str(tmp_path / "tokenizer.json")
    monkeypatch.setattr(
        "huggingface_hub.try_to_load_from_cache",
        lambda repo_id, filename: found if repo_id == "Qwen/Qwen3-VL-8B-Instruct" else None,
    )

    class Endpoint:
        name = "Qwen/Qwen3-VL-8B-Instruct"

    counter = counter_for(Endpoint())
    assert counter.source == "tokenizer:Qwen/Qwen3-VL-8B-Instruct"
    assert counter.text("abc") == len(build_tokenizer().encode("abc", add_special_tokens=False))
