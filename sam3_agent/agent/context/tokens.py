"""Token accounting: with the model's tokenizer (and chat template) when one is available
offline, else an estimate that leans towards counting over; images by the Qwen-VL resize
rule on the size sent (within a factor of two of what GPT-4o, Gemini and Llama-3.2 charge)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sam3_agent.backends.base import tokenizer_of
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart

logger = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 5  # <|im_start|>, the role, a newline, <|im_end|>, a newline
GENERATION_PROMPT = 3  # the reply's opening every request ends with: <|im_start|>assistant\n
# A native tool call's wrapping besides its name and arguments (Qwen's chat template writes
# <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>).
TOOL_CALL_OVERHEAD = 12
TOOL_RESULT_OVERHEAD = 4  # <tool_response>\n ... \n</tool_response>
IMAGE_MARKERS = 2  # <|vision_start|> and <|vision_end|> around each image's tokens
BYTES_PER_TOKEN = 4  # the estimate's divisor, when no tokenizer is available offline
QWEN25_CELL = 28  # Qwen2.5-VL: 14 px patches merged 2×2, one token per 28×28 px cell
QWEN3_CELL = 32  # Qwen3-VL: 16 px patches merged 2×2, one token per 32×32 px cell
# Qwen2.5-VL's processor bounds (min_pixels, max_pixels); images are rescaled into them.
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 16384


def qwen_image_tokens(height: int, width: int, cell: int = QWEN25_CELL) -> int:
    """Vision tokens of one ``height``×``width`` image as Qwen-VL's ``smart_resize`` sizes it
    (markers not included)."""
    h = max(cell, round(height / cell) * cell)
    w = max(cell, round(width / cell) * cell)
    max_pixels = QWEN_MAX_PIXELS * (cell / QWEN25_CELL) ** 2
    min_pixels = QWEN_MIN_PIXELS * (cell / QWEN25_CELL) ** 2
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(cell, math.floor(height / beta / cell) * cell)
        w = max(cell, math.floor(width / beta / cell) * cell)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / cell) * cell
        w = math.ceil(width * beta / cell) * cell
    return (h // cell) * (w // cell)


def image_cell_for(model_name: str) -> int:
    """The pixel cell per image token for a model name (Qwen3-VL: 32; everything else: 28)."""
    name = model_name.lower().replace("_", "-")
    return QWEN3_CELL if "qwen3" in name else QWEN25_CELL


@dataclass
class Tokens:
    """Tokens split by kind; summed with ``+``."""

    text: int = 0
    image: int = 0

    @property
    def total(self) -> int:
        return self.text + self.image

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.text + other.text, self.image + other.image)

    def to_dict(self) -> dict[str, int]:
        return {"text": self.text, "image": self.image, "total": self.total}


@dataclass
class TokenCounter:
    """Counts the tokens of messages as one model sees them; ``encode_len`` None: the estimate;
    ``source`` (``"tokenizer:<name>"`` or ``"estimate"``) is recorded in traces and results."""

    encode_len: Callable[[str], int] | None = None
    image_cell: int = QWEN25_CELL
    source: str = "estimate"
    render_len: Callable[[Sequence[ChatMessage], bool], int] | None = None
    """Tokens of messages as the chat template renders them (text only, images left out),
    with or without the generation prompt; None without a template."""
    _text: Callable[[str], int] = field(init=False, repr=False)
    _framing: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _generation: int = field(init=False, repr=False, default=GENERATION_PROMPT)

    def __post_init__(self) -> None:
        # The same round texts are counted every round: remember them.
        self._text = lru_cache(maxsize=8192)(self._count_text)
        if self.render_len is not None:
            self._measure_template(self.render_len)

    def _measure_template(self, render_len: Callable[[Sequence[ChatMessage], bool], int]) -> None:
        """Each role's framing and the generation prompt, as the template writes them."""
        try:
            for role in ("system", "user", "assistant"):
                probe = [ChatMessage.text(role, "x")]
                self._framing[role] = render_len(probe, False) - self.text("x")
            probe = [ChatMessage.text("user", "x")]
            self._generation = render_len(probe, True) - render_len(probe, False)
        except Exception as e:  # a template that cannot render these: the estimate's framing
            logger.info("cannot measure the chat template (%s); estimating its framing", e)
            self.render_len = None
            self._framing.clear()
            self._generation = GENERATION_PROMPT

    def _count_text(self, text: str) -> int:
        if not text:
            return 0
        if self.encode_len is not None:
            return self.encode_len(_encodable(text))
        # Lone surrogates (any string a model or user wrote) count as the 3 bytes each they take.
        return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)

    def text(self, text: str) -> int:
        """Tokens of ``text`` (no message overhead)."""
        return self._text(text)

    def image(self, width: int, height: int) -> int:
        """Tokens of one image of this size as sent, markers included."""
        return qwen_image_tokens(height, width, self.image_cell) + IMAGE_MARKERS

    def message(self, message: ChatMessage) -> Tokens:
        """Tokens of one message, role markers and native tool calls included."""
        text = max(MESSAGE_OVERHEAD, self._framing.get(message.role, MESSAGE_OVERHEAD))
        if message.role == "tool":
            text += TOOL_RESULT_OVERHEAD
        for call in message.tool_calls:
            text += TOOL_CALL_OVERHEAD + self.text(call.name) + self.text(call.arguments)
        image = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                text += self.text(part.text)
            elif isinstance(part, ImagePart):
                image += self.image(part.image.width, part.image.height)
        return Tokens(text, image)

    @property
    def request_overhead(self) -> int:
        """Tokens a request adds beyond its messages (the generation prompt)."""
        return self._generation

    def messages(self, messages: Iterable[ChatMessage]) -> Tokens:
        """Tokens of a whole request, the generation prompt included (with a chat template,
        exactly the text it renders)."""
        messages = list(messages)
        total = sum((self.message(m) for m in messages), Tokens(self._generation, 0))
        exact = self._rendered(messages)
        return total if exact is None else Tokens(exact, total.image)

    def _rendered(self, messages: Sequence[ChatMessage]) -> int | None:
        """Text tokens of the request as the chat template renders it; None where it cannot."""
        if self.render_len is None or any(m.tool_calls or m.role == "tool" for m in messages):
            return None
        try:
            return self.render_len(messages, True)
        except Exception as e:  # the template refused this request: count it the other way
            logger.debug("chat template failed on a request (%s); summing its messages", e)
            return None

    def per_message(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Total tokens of each message, in order (for the trace and the inspector)."""
        return [self.message(m).total for m in messages]


def _encodable(text: str) -> str:
    """``text`` with lone surrogates replaced: tokenizers take valid UTF-8 only."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def counter_for(chat_model: Any) -> TokenCounter:
    """The best :class:`TokenCounter` for ``chat_model`` that needs no network: its own
    tokenizer, else one in the local hub cache for its name, else the estimate."""
    name = str(getattr(chat_model, "name", ""))
    cell = image_cell_for(name)
    tokenizer = tokenizer_of(chat_model)
    if tokenizer is None:
        tokenizer = _cached_tokenizer(name)
    if tokenizer is None:
        return TokenCounter(image_cell=cell)

    def encode_len(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    render_len = None
    if getattr(tokenizer, "chat_template", None) and hasattr(tokenizer, "apply_chat_template"):

        def render_len(messages: Sequence[ChatMessage], generation_prompt: bool) -> int:
            conversation = [
                {
                    "role": m.role,
                    "content": [
                        {"type": "text", "text": _encodable(p.text)}
                        for p in m.parts
                        if isinstance(p, TextPart)
                    ],
                }
                for m in messages
            ]
            text = tokenizer.apply_chat_template(
                conversation, add_generation_prompt=generation_prompt, tokenize=False
            )
            return encode_len(str(text))

    return TokenCounter(
        encode_len=encode_len, image_cell=cell, source=f"tokenizer:{name}", render_len=render_len
    )


def _cached_tokenizer(name: str) -> Any:
    """A tokenizer for hub id ``name`` from the local cache only; None when absent."""
    if not name or "/" not in name:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "tokenizer.json")
    except Exception:  # a malformed id or cache: fall back to the estimate
        return None
    if not isinstance(found, str):
        return None
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(found)
    except Exception as e:  # an unreadable cached file: the estimate is still correct enough
        logger.info("cannot read the cached tokenizer of %s (%s); estimating tokens", name, e)
        return None
    return _TokenizersAdapter(tokenizer)


@dataclass(frozen=True)
class _TokenizersAdapter:
    """``tokenizers.Tokenizer`` with the ``encode(text, add_special_tokens=)`` of transformers."""

    tokenizer: Any

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)
