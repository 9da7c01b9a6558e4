"""Counted tokens against what the chat template renders (tiny Qwen2.5-VL, built offline).

Issue 16: the count ran 0.4-0.5 % low against the token ids an in-process Qwen2.5-VL
received, because the template's framing and the generation prompt were not counted, so a
call could exceed the budget it was checked against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sam3_agent.agent.context.registry import PolicyInputs, build_policy
from sam3_agent.agent.context.tokens import GENERATION_PROMPT, MESSAGE_OVERHEAD, counter_for
from sam3_agent.agent.context.types import Budget, ContextBudgetError, History, record_of
from sam3_agent.values.config import CONTEXT_POLICIES, AgentConfig
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart
from tests.support.context_histories import Spec, history
from tests.support.fakes import ScriptedChatModel
from tests.support.tiny_qwen import build_processor, build_tokenizer

TOKENIZER = build_tokenizer()


@dataclass
class WithTokenizer:
    """A chat model as counter_for sees the in-process one: a name and a tokenizer."""

    tokenizer: Any
    name: str = "tiny-qwen"


COUNTER = counter_for(WithTokenizer(TOKENIZER))


def rendered(messages: Sequence[ChatMessage]) -> int:
    """Text tokens of ``messages`` as the template renders them, generation prompt included."""
    conversation = [
        {
            "role": m.role,
            "content": [
                {"type": "text", "text": p.text} for p in m.parts if isinstance(p, TextPart)
            ],
        }
        for m in messages
    ]
    text = TOKENIZER.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    return len(TOKENIZER.encode(text, add_special_tokens=False))


texts = st.text(st.characters(codec="utf-8"), max_size=200)
requests = st.lists(
    st.tuples(st.sampled_from(["system", "user", "assistant"]), st.lists(texts, max_size=3)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(requests)
def test_a_request_counts_exactly_what_the_template_renders(
    request: list[tuple[str, list[str]]],
) -> None:
    messages = [ChatMessage(role, tuple(TextPart(t) for t in parts)) for role, parts in request]
    exact = rendered(messages)
    assert COUNTER.messages(messages).total == exact
    # The per-message sum the policies decide with never counts under the template either.
    summed = sum(COUNTER.message(m).total for m in messages) + COUNTER.request_overhead
    assert summed >= exact


def test_the_estimate_counts_chatml_framing_and_the_generation_prompt() -> None:
    # <|im_start|>, role, newline, <|im_end|>, newline; then <|im_start|>assistant newline.
    assert MESSAGE_OVERHEAD >= 5 and GENERATION_PROMPT >= 3
    estimate = counter_for(object())
    messages = [ChatMessage.text("system", "abcd"), ChatMessage.text("user", "abcd")]
    assert estimate.messages(messages).total == 2 * (1 + MESSAGE_OVERHEAD) + GENERATION_PROMPT


def test_a_request_with_an_image_counts_what_the_processor_feeds_the_model() -> None:
    """The token ids the in-process Qwen2.5-VL receives, images expanded, are the count."""
    processor = build_processor()
    counter = counter_for(WithTokenizer(processor.tokenizer))
    pixels = np.zeros((112, 112, 3), dtype=np.uint8)  # inside the tiny processor's pixel bounds
    image = EncodedImage.encode(pixels, "masks")
    messages = [
        ChatMessage.text("system", "You segment things."),
        ChatMessage("user", (ImagePart(image), TextPart('Request: "the cat on the left"'))),
        ChatMessage.text("assistant", "<think>look</think> reply"),
        ChatMessage("user", (ImagePart(image), TextPart("3 masks found."))),
    ]
    conversation = [
        {
            "role": m.role,
            "content": [
                {"type": "image", "image": p.image.to_pil()}
                if isinstance(p, ImagePart)
                else {"type": "text", "text": p.text}
                for p in m.parts
            ],
        }
        for m in messages
    ]
    inputs = processor.apply_chat_template(
        conversation, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    received = len(inputs["input_ids"][0])
    assert counter.messages(messages).total == received


specs = st.lists(
    st.builds(
        Spec,
        kind=st.sampled_from(["segment", "examine", "correction"]),
        shows_masks=st.booleans(),
        words=st.integers(0, 60),
    ),
    min_size=4,
    max_size=16,
)


@pytest.mark.parametrize("name", [p for p in CONTEXT_POLICIES if p != "attention"])
@settings(max_examples=8, deadline=None)
@given(spec=specs, max_tokens=st.integers(3000, 9000))
def test_no_policy_sends_more_than_the_template_renders_within_its_budget(
    name: str, spec: list[Spec], max_tokens: int
) -> None:
    """Counted with the template (byte-level: about four times the estimate's tokens)."""
    budget = Budget(max_tokens, 256)
    config = AgentConfig(
        context_policy=name, max_context_tokens=max_tokens, context_reserve_tokens=256
    )
    policy = build_policy(PolicyInputs(config, COUNTER, ScriptedChatModel()))
    full = history(spec)

    async def session() -> None:
        for n in range(len(full.steps) + 1):
            h = History(full.system_prompt, full.task, full.steps[:n])
            try:
                context = await policy.build(h)
            except ContextBudgetError:
                return
            record = record_of(context)
            images = sum(COUNTER.message(m).image for m in context.messages)
            sent = rendered(context.messages) + images
            assert record.tokens_after.total >= sent
            assert sent <= budget.limit
        aclose = getattr(policy, "aclose", None)
        if aclose is not None:
            await aclose()

    asyncio.run(session())
