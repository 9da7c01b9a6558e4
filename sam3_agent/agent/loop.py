"""The agent loop: the MLLM calls tools on SAM 3 until it selects masks or gives up.

One :class:`Sam3Agent` is built once with its two backends and answers many requests;
each request gets its own :class:`~sam3_agent.agent.session.Session`. Model mistakes never
raise: they become corrective messages, bounded by ``max_corrections``. Infrastructure
failures raise a :class:`~sam3_agent.values.errors.Sam3AgentError` subclass.

After each round the loop's hooks (:mod:`sam3_agent.agent.hooks`) write the trace, commit
the checkpoint and tell the caller; the run directory's files are written by
:mod:`sam3_agent.agent.rundir`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from sam3_agent.agent import prompts, rundir, tools
from sam3_agent.agent.checkpoint import Checkpoint, Ending, Fingerprint
from sam3_agent.agent.context import ContextBudgetError, ContextPolicy, History, counter_for
from sam3_agent.agent.context.registry import PolicyInputs, build_policy, check_backend
from sam3_agent.agent.ended import rounds_spent, session_result
from sam3_agent.agent.events import MaskCheck, RoundCallback, RoundEvent
from sam3_agent.agent.export import ExportFormat
from sam3_agent.agent.hooks import (
    CommitHook,
    EventHook,
    FinishedRound,
    RoundHook,
    TraceHook,
    digest_sink,
)
from sam3_agent.agent.parsing import ParsedReply, parse_native, parse_reply
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.session import AgentSession, Session
from sam3_agent.agent.steps import (
    Final,
    Observation,
    TaskStep,
    ToolMistake,
    ToolOutcome,
    round_step,
)
from sam3_agent.backends.base import ChatModel, Segmenter, describe_backend, preflight
from sam3_agent.backends.identity import CHAT, SEGMENTER
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import Sam3AgentError, UserError
from sam3_agent.values.images import ImageInput, load_image
from sam3_agent.values.messages import ChatResponse
from sam3_agent.values.text import echo

__all__ = ["STOPPED", "MaskCheck", "RoundCallback", "RoundEvent", "Sam3Agent", "check_query"]

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


STOPPED = "stopped before the session ended"
"""The ``failure`` of a session whose task was cancelled (a stop button, a closed page)."""


class RunOptions(TypedDict, total=False):
    """The keyword options of :meth:`Sam3Agent.arun` (and :meth:`Sam3Agent.run`)."""

    output_dir: str | Path | None
    on_round: RoundCallback | None
    resume: bool
    exports: Iterable[ExportFormat]
    image_path: str | Path | None


class Sam3Agent:
    """An MLLM that segments what a request describes, using SAM 3 as a tool.

    Example::

        agent = Sam3Agent(segmenter, chat_model, AgentConfig(max_rounds=5))
        result = agent.run("photo.jpg", "the leftmost child", output_dir="out/")
    """

    tool_registry: tools.Registry = tools.TOOLS
    """The tools the model may call (the video agent has its own, of the same names)."""
    prompt_kind: prompts.PromptKind = "image"
    """Which templates of a prompt set this agent renders."""

    def __init__(
        self, segmenter: Segmenter, chat_model: ChatModel, config: AgentConfig | None = None
    ) -> None:
        self.segmenter = segmenter
        self.chat_model = chat_model
        self.config = config or AgentConfig()
        docs = tools.tool_docs(self.tool_registry)
        self.prompts = prompts.load_prompt_set(
            self.config.prompts_dir, tool_docs=docs, kind=self.prompt_kind
        )
        # Rendered once: the same bytes open every conversation, so servers can cache them.
        self.system_prompt = self.prompts.render(
            "system", tools=docs, protocol=self.config.tool_protocol
        )
        self.checker_prompt = self.prompts.render("checker_system")
        native = self.config.tool_protocol == "native"
        self._tool_specs = tools.tool_specs(self.tool_registry) if native else None
        check_backend(self.config, chat_model)  # e.g. attention without transformers: refuse now
        self.token_counter = counter_for(chat_model)

    def run(self, image: ImageInput, query: str, **options: Unpack[RunOptions]) -> AgentResult:
        """Blocking form of :meth:`arun` (the same options); also works where an event loop
        is already running."""
        return run_blocking(self.arun(image, query, **options))

    async def arun(
        self,
        image: ImageInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
        exports: Iterable[ExportFormat] = (),
        image_path: str | Path | None = None,
    ) -> AgentResult:
        """Answer ``query`` on ``image`` (a path, PIL image or ``(H, W, 3)`` uint8 array).

        With ``output_dir``, ``result.json``, ``overlay.png`` and ``trace.jsonl`` are written
        there (also when the session fails, and before an infrastructure error propagates),
        with the ``exports`` asked for (:mod:`sam3_agent.agent.export`), and the session's
        state is committed there after every round (:mod:`sam3_agent.agent.checkpoint`).
        With ``resume=True`` the session saved in ``output_dir`` continues from its last
        committed round, with the prompts it started with; calls that had finished are not
        made again. ``image_path``: the file ``result.json`` names when ``image`` is given
        already decoded (a path given as ``image`` is named as it is).

        The session's messages render with this agent's prompt set (``config.prompts_dir``);
        a resumed session's with the set it started with.

        Raises:
            UserError: empty query. ImageLoadError: unreadable image.
            ResumeError: nothing to resume, or a different image, query or settings.
            ChatModelError, SegmenterError: a backend failed.
        """
        check_query(query)
        started = time.perf_counter()
        out = Path(output_dir) if output_dir is not None else None
        if image_path is None and isinstance(image, (str, Path)):
            image_path = image
        path = str(image_path) if image_path is not None else None
        chosen = frozenset(exports)
        # Decoding, downscaling and encoding a large photo takes a while: keep the event loop
        # free for the other sessions of a batch evaluation.
        session, checkpoint = await asyncio.to_thread(self._new_session, image, query, out, resume)
        session.started = started  # the image's decoding is work on the session too
        session.start()

        async def conclude(final: Final | None, failure: str | None) -> AgentResult:
            result = self._result(session, path, final, failure)
            await self._write(result, out, session, chosen)
            return result

        return await self._drive(session, on_round, checkpoint, conclude)

    async def _drive(
        self,
        session: AgentSession,
        on_round: RoundCallback | None,
        checkpoint: Checkpoint,
        conclude: Callable[[Final | None, str | None], Awaitable[R]],
    ) -> R:
        """Run the session's rounds, then ``conclude`` it (build and write its result); a
        session stopped by a backend error or a cancelled task is concluded too, with the
        reason as its failure, before the error goes on. The checkpoint is closed either way
        (the run directory is free for a resume)."""
        try:
            final, failure = await self._loop(session, on_round, checkpoint)
        except (Sam3AgentError, asyncio.CancelledError) as e:
            # A stopped session (its task cancelled) also leaves what it has on disk.
            stopped = isinstance(e, asyncio.CancelledError)
            await conclude(None, STOPPED if stopped else f"{type(e).__name__}: {e}")
            raise
        finally:
            await session.close()
            checkpoint.close()
        return await conclude(final, failure)

    def _new_session(
        self, image: ImageInput, query: str, out: Path | None, resume: bool = False
    ) -> tuple[Session, Checkpoint]:
        # First, so a bad image leaves no output directory behind.
        pixels = load_image(image, max_pixels=self.config.max_image_pixels)
        # Before any chat-model request is paid for: a remote SAM 3 that is down or refuses
        # the token fails the run here (a segmenter without a check is taken as ready).
        preflight(self.segmenter)
        checkpoint = self._checkpoint(pixels, query, out, resume)
        session = Session(
            config=self.config,
            segmenter=checkpoint.segmenter(self.segmenter),
            chat_model=checkpoint.chat_model(self.chat_model),
            image=pixels,
            query=query,
            prompts=checkpoint.prompt_set or self.prompts,  # a resumed session's own set
            checker_prompt=checkpoint.checker_prompt,
            trace=checkpoint.trace,
            token_counter=self.token_counter,
        )
        return session, checkpoint

    def _checkpoint(self, pixels: Any, query: str, out: Path | None, resume: bool) -> Checkpoint:
        """Where the session's state is committed; on resume, the saved session's prompts."""
        return self._open_checkpoint(
            out,
            resume,
            lambda: Fingerprint.of(
                query=query,
                image=pixels,
                config=self.config,
                model=self.chat_model.name,
                backends=self._backend_descriptions(self.segmenter),
            ),
        )

    def _backend_descriptions(self, segmenter: object) -> dict[str, Any]:
        """What each backend says shapes its answers (model, dtype, generation settings): a
        resumed session must be answered under the same."""
        return {CHAT: describe_backend(self.chat_model), SEGMENTER: describe_backend(segmenter)}

    def _open_checkpoint(
        self, out: Path | None, resume: bool, fingerprint: Callable[[], Fingerprint]
    ) -> Checkpoint:
        """A session's checkpoint in ``out`` (none without it): resumed, or started with
        this agent's prompts. ``fingerprint`` is made only where there is a directory."""
        if out is None:
            if resume:
                raise UserError("resume needs the output directory of the session to continue")
            return Checkpoint.disabled(
                system_prompt=self.system_prompt, checker_prompt=self.checker_prompt
            )
        if resume:
            return Checkpoint.resume(out, fingerprint())
        return Checkpoint.start(
            out,
            fingerprint(),
            system_prompt=self.system_prompt,
            checker_prompt=self.checker_prompt,
            prompt_set=self.prompts,
        )

    async def _loop(
        self, session: AgentSession, on_round: RoundCallback | None, checkpoint: Checkpoint
    ) -> tuple[Final | None, str | None]:
        task = TaskStep(session.query, session.task_image)
        restored = checkpoint.restore(session.mask_size)
        session.restore(restored)
        if restored.ending is not None:
            return restored.ending.final, restored.ending.failure
        # After the restore: the policy's digest accounting adds to the restored usage, and
        # its state (digests, mode, attention) continues from the last committed round.
        policy = self._context_policy(session)
        if restored.context is not None:
            policy.restore_state(restored.context)
        hooks: list[RoundHook] = [TraceHook(self.token_counter), CommitHook(checkpoint, policy)]
        if on_round is not None:
            hooks.append(EventHook(on_round))
        # The resumed session's own system prompt (the one its earlier rounds were sent).
        history = History(checkpoint.system_prompt, task, restored.steps, session.prompts)
        try:
            return await self._rounds(session, history, restored.corrections, policy, hooks)
        finally:
            await policy.aclose()

    def _context_policy(self, session: AgentSession) -> ContextPolicy:
        """The session's context policy, its digest calls counted and traced (the
        context benchmark wraps it)."""
        session.usage.estimate_source = self.token_counter.source
        sink = digest_sink(session, self.token_counter)
        # The session's (journaled) model: a digest call is replayed on resume like any other.
        inputs = PolicyInputs(self.config, self.token_counter, session.chat_model, sink)
        return build_policy(inputs)

    async def _rounds(
        self,
        session: AgentSession,
        history: History,
        corrections: int,
        policy: ContextPolicy,
        hooks: list[RoundHook],
    ) -> tuple[Final | None, str | None]:
        steps = list(history.steps)
        while True:
            if session.round >= self.config.max_rounds:
                return None, rounds_spent(self.config.max_rounds)
            try:
                with session.timed("context"):
                    context = await policy.build(
                        History(history.system_prompt, history.task, steps, session.prompts)
                    )
            except ContextBudgetError as e:
                return None, str(e)
            session.round += 1
            started = time.perf_counter()
            with session.timed("chat"):
                response = await session.chat_model.complete(
                    context.messages, tools=self._tool_specs
                )
            latency_s = time.perf_counter() - started
            session.usage.main = session.usage.main + response.usage
            session.usage.cached_calls += int(response.cached)
            parsed = self._parse(response, session.round)
            outcome = await self._act(session, parsed)
            corrections += outcome.kind == "correction"
            step = round_step(session.round, response, parsed, outcome)
            # Counted on the loop (the tokenizer is shared by every session of the process);
            # the usage estimate is kept whether or not a trace is written.
            tokens = self.token_counter.messages(context.messages)
            session.usage.add_estimate("main", tokens.text, tokens.image)
            ending: Ending | None = None
            if outcome.final is not None:
                ending = Ending(outcome.final, None)
            else:
                steps.append(step)
                if corrections > self.config.max_corrections:
                    ending = Ending(None, (
                        f"the model made {corrections} mistakes; the budget is "
                        f"{self.config.max_corrections} (last: {outcome.observation.text[:120]})"
                    ))  # fmt: skip
            done = FinishedRound(
                step, context, tokens, response, parsed, started, latency_s, steps, corrections,
                ending,
            )  # fmt: skip
            for hook in hooks:
                await hook(session, done)
            if ending is not None:
                return ending.final, ending.failure

    def _parse(self, response: ChatResponse, round_number: int) -> ParsedReply:
        truncated = response.finish_reason == "length"
        if self.config.tool_protocol == "native":
            # Our own id, the same in every run, so replayed contexts hit the response cache.
            call_id = f"call{round_number:05d}"
            return parse_native(
                response.text, response.tool_calls, truncated=truncated, call_id=call_id
            )
        return parse_reply(response.text, truncated=truncated)

    async def _act(self, session: AgentSession, parsed: ParsedReply) -> ToolOutcome:
        try:
            if parsed.call is None:
                kind = parsed.mistake or "no_tool"
                args = {"detail": echo(parsed.detail)} if kind == "invalid_json" else {}
                raise ToolMistake(session.prompts.feedback(kind, **args))
            return await tools.execute(session, parsed.call, self.tool_registry)
        except ToolMistake as mistake:
            return ToolOutcome("correction", Observation(str(mistake)))

    def _result(
        self,
        session: Session,
        image_path: str | None,
        final: Final | None,
        failure: str | None,
    ) -> AgentResult:
        return session_result(
            query=session.query,
            image_size=session.image.shape[:2],
            final=final,
            failure=failure,
            rounds=session.round,
            usage=session.usage,
            timings=session.timings,
            total_s=session.total_s(),
            model=self.chat_model.name,
            image_path=image_path,
            phrases=session.phrases,
            config=self.config,
            token_count=self.token_counter.source,
            prompt_set=session.prompts.describe(),  # a resumed session's own set
        )

    @staticmethod
    async def _write(
        result: AgentResult, out: Path | None, session: Session, exports: frozenset[ExportFormat]
    ) -> None:
        if out is None:
            return
        # A full-size overlay's PNG encode and fsync take a second on a large photo: off the
        # event loop, which the other sessions of a batch evaluation share.
        await asyncio.to_thread(rundir.write_run, out, result, session.image, exports)


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, also where an event loop is
    already running (a notebook): then on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def check_query(query: str) -> None:
    """Raise :class:`UserError` for a query the agent cannot work on (empty or blank)."""
    if not query or not query.strip():
        raise UserError("the query is empty")
