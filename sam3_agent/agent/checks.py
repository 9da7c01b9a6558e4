"""``examine_each_mask``: one isolated, concurrent MLLM check per mask.

Each check is a fresh conversation, [checker system prompt, user(raw image, query, the
image with that one mask drawn, a close-up)], so checks are independent and run at the
same time (bounded by a semaphore). Only their summary enters the main conversation.

A check sends only what its judgement needs: the two whole-image views at the smallest
size that still shows that mask clearly (:meth:`~sam3_agent.media.render.Renderer.context_side`),
and a close-up at the region's own resolution within bounds; twenty checks carry most of a
session's tokens, so each image is sized for its mask, not for the photo.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sam3_agent.agent.parsing import Verdict, parse_verdict
from sam3_agent.backends.base import ChatModel
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, ImagePart, TextPart, TokenUsage

if TYPE_CHECKING:
    from sam3_agent.agent.prompts import PromptSet


@dataclass(frozen=True)
class CheckRequest:
    """What the checker sees for mask ``number`` (1-based, of ``total``): the image and the
    image with the mask drawn (both at the same, per-mask size), and the close-up."""

    number: int
    total: int
    raw_image: EncodedImage
    mask_image: EncodedImage
    zoom_image: EncodedImage


@dataclass
class CheckResult:
    """The verdict on one mask. ``forced`` means no clear verdict came and Reject was assumed."""

    number: int
    verdict: Verdict
    forced: bool = False
    replies: list[str] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    cached_calls: int = 0

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"


@dataclass(frozen=True)
class CheckCall:
    """One checker request and its answer, for the trace."""

    number: int
    attempt: int
    messages: list[ChatMessage]
    response: ChatResponse
    verdict: Verdict | None
    latency_s: float


CallRecorder = Callable[[CheckCall], None]


async def check_one(
    chat_model: ChatModel,
    *,
    system_prompt: str,
    prompts: PromptSet,
    query: str,
    request: CheckRequest,
    verdict_retries: int,
    record: CallRecorder,
) -> CheckResult:
    """Ask for a verdict; ask again up to ``verdict_retries`` times if unclear, then Reject.
    The request and the reminder render with ``prompts``."""
    user = ChatMessage(
        "user",
        (
            ImagePart(request.raw_image),
            ImagePart(request.mask_image),
            ImagePart(request.zoom_image),
            TextPart(
                prompts.render(
                    "checker_user", query=query, number=request.number, total=request.total
                )
            ),
        ),
    )
    messages = [ChatMessage.text("system", system_prompt), user]
    result = CheckResult(number=request.number, verdict="reject")
    for attempt in range(verdict_retries + 1):
        started = time.perf_counter()
        response: ChatResponse = await chat_model.complete(messages)
        elapsed = time.perf_counter() - started
        result.usage = result.usage + response.usage
        result.cached_calls += int(response.cached)
        result.replies.append(response.text)
        verdict = parse_verdict(response.text)
        record(CheckCall(request.number, attempt + 1, messages, response, verdict, elapsed))
        if verdict is not None:
            result.verdict = verdict
            return result
        messages = [
            *messages,
            ChatMessage.text("assistant", response.text),
            ChatMessage.text("user", prompts.feedback("verdict_unclear")),
        ]
    result.forced = True
    return result


async def check_all(
    chat_model: ChatModel,
    *,
    system_prompt: str,
    prompts: PromptSet,
    query: str,
    requests: Sequence[CheckRequest],
    concurrency: int,
    verdict_retries: int,
    record: CallRecorder,
) -> list[CheckResult]:
    """Check every mask concurrently (at most ``concurrency`` at once), results in order."""
    semaphore = asyncio.Semaphore(concurrency)

    async def bounded(request: CheckRequest) -> CheckResult:
        async with semaphore:
            return await check_one(
                chat_model,
                system_prompt=system_prompt,
                prompts=prompts,
                query=query,
                request=request,
                verdict_retries=verdict_retries,
                record=record,
            )

    tasks = [asyncio.ensure_future(bounded(r)) for r in requests]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        # One failed check (endpoint down) fails the round; do not leave the rest running.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
