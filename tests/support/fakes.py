"""Test doubles, in one place: a scripted chat model and a fake segmenter.

Nothing here pretends to be a real model: replies are scripted by each test and masks are
the ones the test hands over.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sam3_agent.media.video import VideoSource
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, TokenUsage, ToolSpec
from sam3_agent.values.tracks import TrackBuilder, Tracks
from tests.support.clips import Square
from tests.support.clips import square_mask as clip_square_mask

Reply = str | ChatResponse | Callable[[Sequence[ChatMessage]], str]
CHECK_MASK_NUMBER = re.compile(r"(?:mask|track)\s+#?(\d+)", re.IGNORECASE)


def is_check_request(messages: Sequence[ChatMessage]) -> bool:
    """Checker conversations carry the checker system prompt, which names the verdict tag."""
    return "<verdict>" in messages[0].joined_text


def is_digest_request(messages: Sequence[ChatMessage]) -> bool:
    """The summary policy's digest calls carry a system prompt naming the digest tag."""
    return "<digest>" in messages[0].joined_text


@dataclass
class ScriptedChatModel:
    """Answers the main conversation from a queue, and mask checks from ``verdicts``.

    Attributes:
        replies: main-conversation replies in order: text, a whole ChatResponse (native tool
            calls, finish reasons), or a function of the messages giving text.
        verdicts: mask number (1-based, as shown to the checker) -> checker reply; a
            missing number answers ``default_verdict``.
        digest_reply: the answer to every digest request of the summary context policy.
        delay_s: simulated latency per call (``asyncio.sleep``, so concurrency is real).
        calls: every message list received, main and checks, in arrival order.
        transcript: every message list with the response it got, in arrival order.
    """

    replies: list[Reply] = field(default_factory=list)
    verdicts: dict[int, str | list[str]] = field(default_factory=dict)
    default_verdict: str = "Looks right. <verdict>Accept</verdict>"
    digest_reply: str = "<digest>Earlier rounds tried other phrases.</digest>"
    delay_s: float = 0.0
    name: str = "scripted"
    prompt_tokens: int = 100
    completion_tokens: int = 10
    calls: list[list[ChatMessage]] = field(default_factory=list)
    main_calls: list[list[ChatMessage]] = field(default_factory=list)
    check_calls: list[list[ChatMessage]] = field(default_factory=list)
    digest_calls: list[list[ChatMessage]] = field(default_factory=list)
    tools_seen: list[list[ToolSpec] | None] = field(default_factory=list)
    transcript: list[tuple[list[ChatMessage], ChatResponse]] = field(default_factory=list)

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        response = await self._answer(messages, tools)
        self.transcript.append((list(messages), response))
        return response

    async def _answer(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None
    ) -> ChatResponse:
        self.calls.append(list(messages))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        usage = TokenUsage(self.prompt_tokens, self.completion_tokens, 1)
        if is_check_request(messages):
            self.check_calls.append(list(messages))
            return ChatResponse(text=self._verdict(messages), usage=usage)
        if is_digest_request(messages):
            self.digest_calls.append(list(messages))
            return ChatResponse(text=self.digest_reply, usage=usage)
        self.main_calls.append(list(messages))
        if not self.replies:
            raise AssertionError("ScriptedChatModel ran out of scripted replies")
        self.tools_seen.append(list(tools) if tools else None)
        reply = self.replies.pop(0)
        if isinstance(reply, ChatResponse):
            return reply
        text = reply(messages) if callable(reply) else reply
        return ChatResponse(text=text, usage=usage)

    def _verdict(self, messages: Sequence[ChatMessage]) -> str:
        user_text = messages[1].joined_text
        match = CHECK_MASK_NUMBER.search(user_text)
        number = int(match.group(1)) if match else -1
        answer = self.verdicts.get(number, self.default_verdict)
        if isinstance(answer, list):
            # A list scripts successive answers to the same mask (e.g. unclear, then clear).
            return answer.pop(0) if len(answer) > 1 else answer[0]
        return answer


def tool(name: str, **params: object) -> str:
    """A well-formed reply calling ``name`` with ``params``."""
    call = json.dumps({"name": name, "parameters": params})
    return f"<think>Working on it.</think>\n<tool>{call}</tool>"


def square_mask(h: int, w: int, y0: int, x0: int, size: int) -> np.ndarray:
    m = np.zeros((h, w), dtype=bool)
    m[y0 : y0 + size, x0 : x0 + size] = True
    return m


@dataclass
class FakeEmbedding:
    owner: FakeSegmenter
    image: RGBImage

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self.image.shape[0]), int(self.image.shape[1])

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        out = []
        for phrase in phrases:
            self.owner.phrases.append(phrase)
            self.owner.exemplars.append(exemplars)
            entry = self.owner.results.get(phrase, self.owner.default)
            if entry is None:
                out.append(Detections.empty(*self.image_size))
            elif callable(entry):
                out.append(entry(self.image))
            else:
                out.append(entry)
        return out

    def used_phrase(self, phrase: str) -> str:
        limit = self.owner.max_words
        words = phrase.split()
        return phrase if limit is None or len(words) <= limit else " ".join(words[:limit])


@dataclass
class FakeSegmenter:
    """Returns the detections a test registered for each phrase (empty for others).

    ``results`` maps phrase -> Detections, or a function of the image giving them;
    ``default`` (the same kinds) answers every other phrase. ``embed_calls`` and ``phrases`` record what the agent asked for. ``max_words``, when set,
    plays the text encoder's limit: longer phrases are read as their first words.
    """

    results: dict[str, Detections | Callable[[RGBImage], Detections]] = field(default_factory=dict)
    default: Detections | Callable[[RGBImage], Detections] | None = None
    embed_calls: int = 0
    phrases: list[str] = field(default_factory=list)
    exemplars: list[Exemplars | None] = field(default_factory=list)  # one per phrase asked
    max_words: int | None = None

    def embed(self, image: RGBImage) -> FakeEmbedding:
        self.embed_calls += 1
        return FakeEmbedding(self, image)


@dataclass
class FakeVideoEmbedding:
    """Tracks of the squares a phrase names, taken from the clip's own ground truth."""

    video: VideoSource
    squares: dict[str, tuple[Square, ...]]
    scores: dict[str, list[float]] = field(default_factory=dict)
    tracked: list[str] = field(default_factory=list)

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        found = []
        for phrase in phrases:
            self.tracked.append(phrase)
            squares = self.squares.get(phrase, ())
            scores = self.scores.get(phrase, [0.9 - 0.1 * i for i in range(len(squares))])
            builder = TrackBuilder(self.video.frame_count, self.video.size)
            for position, index in enumerate(self.video.indices):
                masks = [clip_square_mask(sq, index, self.video.size) for sq in squares]
                if masks:
                    builder.add(position, list(range(1, len(masks) + 1)), np.stack(masks), scores)
            found.append(builder.build())
        return found


@dataclass
class FakeVideoSegmenter:
    """A :class:`~sam3_agent.backends.base.VideoSegmenter` over a synthetic clip: a phrase
    in ``squares`` finds those squares (in that order), any other phrase nothing."""

    squares: dict[str, tuple[Square, ...]]
    scores: dict[str, list[float]] = field(default_factory=dict)
    opened: list[FakeVideoEmbedding] = field(default_factory=list)

    def open(self, video: VideoSource) -> FakeVideoEmbedding:
        embedding = FakeVideoEmbedding(video, self.squares, self.scores)
        self.opened.append(embedding)
        return embedding
