"""The state of one agent session and the services its tools use.

A :class:`Session` owns what changes during one request: the current masks, the phrases
tried, the budgets, usage and timings, and the prompt set it renders with. Tool handlers
(:mod:`sam3_agent.agent.tools`) read and change it only through these methods; a checkpoint
restores it with :meth:`Session.restore` and saves :meth:`Session.snapshot`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from sam3_agent.agent.checkpoint.state import Ending, SessionState
from sam3_agent.agent.checks import CheckCall, CheckRequest, CheckResult, check_all
from sam3_agent.agent.context.tokens import TokenCounter, Tokens
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.result import Usage
from sam3_agent.agent.steps import ActionStep, ToolMistake
from sam3_agent.agent.trace import Trace, check_record
from sam3_agent.backends.base import ChatModel, ImageEmbedding, Segmenter, phrase_as_read
from sam3_agent.media.render import Renderer
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import EncodedImage, RGBImage
from sam3_agent.values.masks import postprocess
from sam3_agent.values.tracks import Tracks

logger = logging.getLogger(__name__)


class AgentSession(Protocol):
    """What the loop, its hooks and the tool dispatcher use of a session: an image
    :class:`Session` or a video one (:mod:`sam3_agent.agent.video.session`)."""

    config: AgentConfig
    prompts: PromptSet
    chat_model: ChatModel
    query: str
    trace: Trace
    task_image: EncodedImage
    phrases: list[str]
    round: int
    checks_used: int
    usage: Usage
    timings: defaultdict[str, float]
    started: float
    last_checks: list[tuple[CheckRequest, CheckResult]]

    @property
    def mask_size(self) -> tuple[int, int]: ...

    def start(self) -> object: ...

    async def close(self) -> None: ...

    def restore(self, state: SessionState) -> None: ...

    def snapshot(
        self,
        steps: Sequence[ActionStep],
        corrections: int,
        ending: Ending | None = None,
        context: dict[str, Any] | None = None,
    ) -> SessionState: ...

    def timed(self, phase: str) -> contextlib.AbstractContextManager[None]: ...

    def total_s(self) -> float: ...


AnswerT = TypeVar("AnswerT", Detections, Tracks)


class SessionProgress(Generic[AnswerT]):
    """What every session counts and commits, image or video: the rounds, the phrases
    tried, the current masks (or tracks), the checks made, usage and timings; how it is
    restored from a checkpoint and snapshot after a round."""

    answer_type: ClassVar[type]
    """What the session selects from (:class:`Detections` or :class:`Tracks`)."""

    config: AgentConfig
    prompts: PromptSet

    def _start_progress(self) -> None:
        self.phrases: list[str] = []
        self.current: AnswerT | None = None
        self.round = 0
        self.checks_used = 0
        self.last_checks: list[tuple[CheckRequest, CheckResult]] = []
        """The latest examine_each_mask: what each checker saw and its verdict."""
        self.usage = Usage()
        self.timings: defaultdict[str, float] = defaultdict(float)
        self.started = time.perf_counter()
        """When this process began on the session (``time.perf_counter``): the loop sets it
        to the start of its call."""
        self._earlier_s = 0.0  # wall seconds of the work before a resume
        self._ended_s: float | None = None  # the total at the commit of the ending

    def restore(self, state: SessionState) -> None:
        """Continue from a committed state (a resumed session)."""
        current = state.current
        if current is not None and not isinstance(current, self.answer_type):
            raise TypeError(
                f"a session of {self.answer_type.__name__} cannot continue from "
                f"{type(current).__name__}"
            )
        self.round = state.round
        self.phrases = list(state.phrases)
        self.current = cast(AnswerT, current)  # checked just above
        self.checks_used = state.checks_used
        self.usage = state.usage
        timings = dict(state.timings)
        earlier = timings.pop("total", None)  # absent from sessions committed before it was
        self._earlier_s = earlier or 0.0
        if state.ending is not None and earlier is not None:
            self._ended_s = earlier
        for phase, seconds in timings.items():
            self.timings[phase] += seconds

    def total_s(self) -> float:
        """Wall seconds of work on the session, before a resume and in this process, up to
        the commit of its ending once it has one (a resume of an ended session adds none)."""
        if self._ended_s is not None:
            return self._ended_s
        return self._earlier_s + time.perf_counter() - self.started

    def snapshot(
        self,
        steps: Sequence[ActionStep],
        corrections: int,
        ending: Ending | None = None,
        context: dict[str, Any] | None = None,
    ) -> SessionState:
        """The state to commit after the round :attr:`round`; ``context`` is the context
        policy's own state (JSON-ready), restored with the rest on resume. ``timings``
        carries the :meth:`total_s` so far, fixed here when ``ending`` is given."""
        total = self.total_s()
        if ending is not None:
            self._ended_s = total
        return SessionState(
            round=self.round,
            corrections=corrections,
            steps=list(steps),
            phrases=list(self.phrases),
            current=self.current,
            checks_used=self.checks_used,
            usage=self.usage,
            timings={**self.timings, "total": total},
            ending=ending,
            context=context,
        )

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] += time.perf_counter() - started

    def require_masks(self, tool_name: str) -> AnswerT:
        """The current masks (tracks); a :class:`ToolMistake` when there are none."""
        if self.current is None or len(self.current) == 0:
            raise ToolMistake(self.prompts.feedback("no_current_masks", name=tool_name))
        return self.current

    def clear_masks(self) -> None:
        self.current = None

    @property
    def checks_left(self) -> int:
        return self.config.max_mask_checks - self.checks_used


class Session(SessionProgress[Detections]):
    """One request: an image, a query, and everything that changes while answering it."""

    answer_type = Detections

    def __init__(
        self,
        *,
        config: AgentConfig,
        segmenter: Segmenter,
        chat_model: ChatModel,
        image: RGBImage,
        query: str,
        prompts: PromptSet,
        checker_prompt: str,
        trace: Trace,
        token_counter: TokenCounter | None = None,
    ) -> None:
        """``prompts``: the set every message of this session renders with."""
        self.config = config
        self.prompts = prompts
        self.chat_model = chat_model
        self.image = image
        self.query = query
        self.trace = trace
        self.token_counter = token_counter or TokenCounter()
        self._segmenter = segmenter
        self._checker_prompt = checker_prompt
        self._embedding: asyncio.Future[ImageEmbedding] | None = None
        self.renderer = Renderer(image, config.max_image_side)
        self.task_image = self._encode(self.renderer.display_image, "input")
        self._contexts = ContextImages(self.renderer, config.jpeg_quality, self.task_image)
        self._start_progress()

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the session's masks."""
        h, w = self.image.shape[:2]
        return int(h), int(w)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> asyncio.Future[ImageEmbedding]:
        """Start computing the image features while the model reads the request."""
        if self._embedding is None:
            self._embedding = asyncio.ensure_future(asyncio.to_thread(self._embed))
        return self._embedding

    def _embed(self) -> ImageEmbedding:
        started = time.perf_counter()
        embedding = self._segmenter.embed(self.image)
        self.timings["embed"] += time.perf_counter() - started
        return embedding

    async def close(self) -> None:
        """Collect the feature computation if nobody awaited it (the model gave up early)."""
        if self._embedding is not None and not self._embedding.cancelled():
            with contextlib.suppress(Exception):
                await self._embedding

    # -- masks -------------------------------------------------------------------------

    def empty_detections(self) -> Detections:
        h, w = self.image.shape[:2]
        return Detections.empty(h, w)

    async def select(self, detections: Detections, indices: list[int]) -> Detections:
        """``detections[indices]`` (0-based), made off the event loop: a selection that is not
        an evenly spaced run copies full-resolution masks, tens of milliseconds on a photo."""
        return await asyncio.to_thread(detections.__getitem__, indices)

    async def segment(self, phrase: str) -> tuple[Detections, str]:
        """SAM 3 on ``phrase``, post-processed; becomes the current masks. Also returns the
        phrase as SAM 3 read it (cut to its text limit; see
        :func:`~sam3_agent.backends.base.phrase_as_read`)."""
        with self.timed("embed_wait"):
            embedding = await self.start()
        with self.timed("segment"):

            def run() -> tuple[Detections, str]:
                found = embedding.segment([phrase], self.config.score_threshold)[0]
                return found, phrase_as_read(embedding, phrase)

            raw, used = await asyncio.to_thread(run)
            detections = await asyncio.to_thread(
                postprocess,
                raw,
                score_threshold=self.config.score_threshold,
                overlap_threshold=self.config.overlap_threshold,
            )
        self.phrases.append(phrase)
        self.current = detections if len(detections) else None
        return detections, used

    async def show_masks(self, detections: Detections) -> EncodedImage:
        """The numbered render of ``detections``, encoded once and saved to the trace."""
        name = f"r{self.round:03d}_masks"

        def render() -> EncodedImage:
            image = self._encode(self.renderer.numbered(detections), name)
            self.trace.save_image(image)
            return image

        with self.timed("render"):
            return await asyncio.to_thread(render)

    def _encode(self, image: RGBImage, name: str) -> EncodedImage:
        return EncodedImage.encode(image, name, quality=self.config.jpeg_quality)

    # -- checks ------------------------------------------------------------------------

    async def check_masks(self, detections: Detections) -> list[bool]:
        """Run one isolated check per mask; True where the checker accepted it."""
        with self.timed("render"):
            requests = await asyncio.to_thread(self._check_requests, detections)
        calls: list[CheckCall] = []
        with self.timed("checks"):
            results = await check_all(
                self.chat_model,
                system_prompt=self._checker_prompt,
                prompts=self.prompts,
                query=self.query,
                requests=requests,
                concurrency=self.config.check_concurrency,
                verdict_retries=self.config.verdict_retries,
                record=calls.append,
            )
        self.last_checks = list(zip(requests, results, strict=True))
        for check in results:
            self.usage.checks = self.usage.checks + check.usage
            self.usage.cached_calls += check.cached_calls
            self.checks_used += len(check.replies)
        ordered = sorted(calls, key=lambda c: (c.number, c.attempt))
        # Counted here, on the loop, once per call: the tokenizer is shared by every
        # session of the process, and the trace thread reuses these figures.
        estimates = [self.token_counter.messages(call.messages) for call in ordered]
        for tokens in estimates:
            self.usage.add_estimate("checks", tokens.text, tokens.image)
        if self.trace.enabled:

            def write_records() -> None:
                for call, tokens in zip(ordered, estimates, strict=True):
                    self._trace_check(call, results[call.number - 1], tokens)

            await asyncio.to_thread(write_records)
        return [r.accepted for r in results]

    def _trace_check(self, call: CheckCall, result: CheckResult, tokens: Tokens) -> None:
        record = check_record(
            self.trace, round_number=self.round, call=call, result=result, tokens=tokens
        )
        self.trace.record(record)

    def _check_requests(self, detections: Detections) -> list[CheckRequest]:
        return check_requests(
            self.renderer,
            detections,
            prefix=f"r{self.round:03d}",
            quality=self.config.jpeg_quality,
            contexts=self._contexts,
        )


RENDER_WORKERS = min(4, os.cpu_count() or 1)
"""Threads rendering and encoding check images at once (OpenCV releases the GIL there)."""


class ContextImages:
    """The plain image encoded once per context size, shared by every check that uses it
    (and by later rounds). Safe to use from several threads."""

    def __init__(
        self, renderer: Renderer, quality: int, display: EncodedImage | None = None
    ) -> None:
        """``display``: the display-size image, when already encoded."""
        self._renderer = renderer
        self._quality = quality
        self._encoded: dict[int, EncodedImage] = {}
        if display is not None:
            self._encoded[max(renderer.display_image.shape[:2])] = display
        self._lock = threading.Lock()

    def get(self, side: int) -> EncodedImage:
        with self._lock:
            cached = self._encoded.get(side)
        if cached is None:
            cached = EncodedImage.encode(
                self._renderer.context(side), f"input_{side}", quality=self._quality
            )
            with self._lock:
                cached = self._encoded.setdefault(side, cached)
        return cached


def check_requests(
    renderer: Renderer,
    detections: Detections,
    *,
    prefix: str,
    quality: int,
    contexts: ContextImages | None = None,
    workers: int = RENDER_WORKERS,
) -> list[CheckRequest]:
    """What each mask's check shows (mask numbers 1-based, in order), rendered and encoded
    on ``workers`` threads: one mask's images are independent of the others'."""
    total = len(detections)
    plain = contexts or ContextImages(renderer, quality)

    def one(i: int) -> CheckRequest:
        name = f"{prefix}_check{i + 1:02d}"
        side = renderer.context_side(detections, i)
        return CheckRequest(
            number=i + 1,
            total=total,
            raw_image=plain.get(side),
            mask_image=EncodedImage.encode(
                renderer.single(detections, i, side), name, quality=quality
            ),
            zoom_image=EncodedImage.encode(
                renderer.zoom(detections, i), f"{name}_zoom", quality=quality
            ),
        )

    if workers <= 1 or total <= 1:
        return [one(i) for i in range(total)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, range(total)))
