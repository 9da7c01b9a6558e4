"""The agent loop: the MLLM calls tools on SAM 3 until it selects masks or gives up; model
mistakes become corrective messages, infrastructure failures a ``Sam3AgentError``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Coroutine, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

from sam3_agent.agent import prompts, tools
from sam3_agent.agent.checkpoint import Checkpoint, Ending
from sam3_agent.agent.context import ContextBudgetError, ContextPolicy, History, counter_for
from sam3_agent.agent.context.registry import PolicyInputs, build_policy, check_backend
from sam3_agent.agent.ended import result_fields, rounds_spent
from sam3_agent.agent.events import (
    FinishedRound,
    MaskCheck,
    RoundCallback,
    RoundEvent,
    commit_round,
    digest_sink,
    round_event,
    trace_round,
)
from sam3_agent.agent.image import ImageMedium, ImageScene, Medium, R, S
from sam3_agent.agent.parsing import ParsedReply, parse_native, parse_reply
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.agent.session import Session
from sam3_agent.agent.steps import (
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
from sam3_agent.values.images import ImageInput
from sam3_agent.values.messages import ChatResponse
from sam3_agent.values.text import echo

__all__ = [
    "STOPPED",
    "Agent",
    "MaskCheck",
    "RoundCallback",
    "RoundEvent",
    "Sam3Agent",
    "check_query",
]

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")

STOPPED = "stopped before the session ended"  # the failure of a cancelled session

In = TypeVar("In")


class RunOptions(TypedDict, total=False):
    output_dir: str | Path | None
    on_round: RoundCallback | None
    resume: bool
    exports: Iterable[ExportFormat]
    image_path: str | Path | None
    downloaded: dict[str, Any] | None


class Agent(Generic[In, S, R]):
    """An MLLM that segments what a request describes in one medium, using SAM 3 as a tool."""

    def __init__(
        self, medium: Medium[In, S, R], chat_model: ChatModel, config: AgentConfig | None
    ) -> None:
        self.medium = medium
        self.chat_model = chat_model
        self.config = config or AgentConfig()
        offered = medium.tool_sets.get(self.config.tool_set)
        if offered is None:
            raise UserError(
                f"`tool_set={self.config.tool_set!r}` is not offered on {medium.kind} input "
                f"(offered: {', '.join(medium.tool_sets)})"
            )
        self.tools = offered
        docs = tools.tool_docs(self.tools)
        self.prompts = prompts.load_prompt_set(
            self.config.prompts_dir, tool_docs=docs, kind=medium.kind, tool_set=self.config.tool_set
        )
        # Rendered once: the same bytes open every conversation, so servers can cache them.
        self.system_prompt = self.prompts.render(
            "system", tools=docs, protocol=self.config.tool_protocol
        )
        if self.config.tool_set == "extended":
            self.system_prompt += "\n" + self.prompts.render("tool_rules")
        self.checker_prompt = self.prompts.render("checker_system")
        native = self.config.tool_protocol == "native"
        self._tool_specs = tools.tool_specs(self.tools) if native else None
        check_backend(self.config, chat_model)  # e.g. attention without transformers: refuse now
        self.token_counter = counter_for(chat_model)

    def run(self, source: In, query: str, **options: Unpack[RunOptions]) -> R:
        """Blocking form of :meth:`arun`; also works inside a running event loop."""
        return run_blocking(self.arun(source, query, **options))

    async def arun(
        self,
        source: In,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
        exports: Iterable[ExportFormat] = (),
        image_path: str | Path | None = None,
        downloaded: dict[str, Any] | None = None,
    ) -> R:
        """Answer ``query`` on ``source`` (an image path, PIL image or ``(H, W, 3)`` uint8
        array; a video file, frame folder or ``VideoSource``).

        With ``output_dir`` the run's files are written there, the session committed after
        every round (``resume=True`` continues it); ``image_path`` and ``downloaded``: what
        ``result.json`` says of an input given decoded or fetched from a URL.
        """
        check_query(query)
        started = time.perf_counter()
        out = Path(output_dir) if output_dir is not None else None

        # Decoding, downscaling and encoding a large photo takes a while: keep the event loop
        # free for the other sessions of a batch evaluation.
        def prepare() -> tuple[S, Session[Any], Checkpoint]:
            # First, so a bad input leaves no output directory behind.
            scene = self.medium.open(source, self.config, image_path=image_path, exports=exports)
            return (scene, *self._new_session(scene, query, out, resume))

        scene, session, checkpoint = await asyncio.to_thread(prepare)
        session.started = started  # reading the input is work on the session too
        session.scene.start(session)

        async def conclude(ending: Ending) -> R:
            snapshot = session.snapshot((), 0)
            fields = result_fields(
                snapshot,
                query=session.query,
                ending=ending,
                model=self.chat_model.name,
                config=self.config,
                token_count=self.token_counter.source,
                prompt_set=session.prompts,  # a resumed session's own set
            )
            result = self.medium.result(scene, fields, ending.final)
            result.downloaded = downloaded
            if out is not None:
                # A full-size overlay's PNG encode and fsync take a second on a large photo:
                # off the event loop, which the other sessions of a batch evaluation share.
                await asyncio.to_thread(self.medium.write, out, result, scene)
            return result

        # A session stopped by a backend error or a cancelled task is concluded too, with the
        # reason as its failure, before the error goes on; the checkpoint is closed either
        # way (the run directory is free for a resume).
        try:
            ending = await self._loop(session, on_round, checkpoint)
        except (Sam3AgentError, asyncio.CancelledError) as e:
            # A stopped session (its task cancelled) also leaves what it has on disk.
            stopped = isinstance(e, asyncio.CancelledError)
            await conclude(Ending(None, STOPPED if stopped else f"{type(e).__name__}: {e}"))
            raise
        finally:
            await session.scene.close()
            checkpoint.close()
        return await conclude(ending)

    def _new_session(
        self, scene: S, query: str, out: Path | None, resume: bool = False
    ) -> tuple[Session[Any], Checkpoint]:
        medium = self.medium
        # Before any chat-model request is paid for: a remote SAM 3 that is down or refuses
        # the token fails the run here (a segmenter without a check is taken as ready).
        preflight(medium.segmenter)
        if out is None and resume:
            raise UserError("resume needs the output directory of the session to continue")
        sent = {"system_prompt": self.system_prompt, "checker_prompt": self.checker_prompt}
        if out is None:
            checkpoint = Checkpoint.disabled(**sent)
        else:
            model = self.chat_model
            backends = {
                CHAT: describe_backend(model),
                SEGMENTER: describe_backend(medium.segmenter),
            }
            fingerprint = medium.fingerprint(scene, query, self.config, model.name, backends)
            checkpoint = (
                Checkpoint.resume(out, fingerprint)
                if resume
                else Checkpoint.start(out, fingerprint, **sent, prompt_set=self.prompts)
            )
        medium.attach(scene, checkpoint)
        session = Session(
            config=self.config,
            scene=scene,
            chat_model=checkpoint.chat_model(self.chat_model),
            query=query,
            prompts=checkpoint.prompt_set or self.prompts,  # a resumed session's own set
            checker_prompt=checkpoint.checker_prompt,
            trace=checkpoint.trace,
            token_counter=self.token_counter,
        )
        return session, checkpoint

    async def _loop(
        self, session: Session[Any], on_round: RoundCallback | None, checkpoint: Checkpoint
    ) -> Ending:
        task = TaskStep(session.query, session.task_image)
        restored = checkpoint.restore(session.scene.mask_size)
        session.restore(restored)
        if restored.ending is not None:
            return restored.ending
        # After the restore: the policy's digest accounting adds to the restored usage, and
        # its state (digests, mode, attention) continues from the last committed round.
        policy = self._context_policy(session)
        if restored.context is not None:
            policy.restore_state(restored.context)
        # The resumed session's own system prompt (the one its earlier rounds were sent).
        history = History(checkpoint.system_prompt, task, restored.steps, session.prompts)
        try:
            return await self._rounds(
                session, history, restored.corrections, policy, checkpoint, on_round
            )
        finally:
            await policy.aclose()

    def _context_policy(self, session: Session) -> ContextPolicy:
        """The session's context policy, its digest calls counted and traced (the context
        benchmark wraps it)."""
        session.usage.estimate_source = self.token_counter.source
        sink = digest_sink(session)
        # The session's (journaled) model: a digest call is replayed on resume like any other.
        return build_policy(PolicyInputs(self.config, self.token_counter, session.chat_model, sink))

    async def _rounds(
        self,
        session: Session[Any],
        history: History,
        corrections: int,
        policy: ContextPolicy,
        checkpoint: Checkpoint,
        on_round: RoundCallback | None,
    ) -> Ending:
        steps = list(history.steps)
        while True:
            if session.round >= self.config.max_rounds:
                return Ending(None, rounds_spent(self.config.max_rounds))
            try:
                with session.timed("context"):
                    now = replace(history, steps=steps, kept_note=session.kept_note())
                    context = await policy.build(now)
            except ContextBudgetError as e:
                return Ending(None, str(e))
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
                    failure = (
                        f"the model made {corrections} mistakes; the budget is "
                        f"{self.config.max_corrections} (last: {outcome.observation.text[:120]})"
                    )
                    ending = Ending(None, failure)
            done = FinishedRound(
                step=step,
                context=context,
                tokens=tokens,
                response=response,
                parsed=parsed,
                started=started,
                latency_s=latency_s,
                steps=steps,
                corrections=corrections,
                ending=ending,
            )
            await trace_round(session, done)
            await commit_round(session, done, checkpoint, policy)
            if on_round is not None:
                on_round(round_event(session, done))
            if ending is not None:
                return ending

    def _parse(self, response: ChatResponse, round_number: int) -> ParsedReply:
        truncated = response.finish_reason == "length"
        if self.config.tool_protocol == "native":
            # Our own id, the same in every run, so replayed contexts hit the response cache.
            call_id = f"call{round_number:05d}"
            return parse_native(
                response.text, response.tool_calls, truncated=truncated, call_id=call_id
            )
        return parse_reply(response.text, truncated=truncated)

    async def _act(self, session: Session[Any], parsed: ParsedReply) -> ToolOutcome:
        try:
            if parsed.call is None:
                kind = parsed.mistake or "no_tool"
                args = {"detail": echo(parsed.detail)} if kind == "invalid_json" else {}
                raise ToolMistake(session.prompts.feedback(kind, **args))
            return await tools.execute(session, parsed.call, self.tools)
        except ToolMistake as mistake:
            return ToolOutcome("correction", Observation(str(mistake)))


class Sam3Agent(Agent[ImageInput, ImageScene, AgentResult]):
    """The agent on images. Example::

    agent = Sam3Agent(segmenter, chat_model, AgentConfig(max_rounds=5))
    result = agent.run("photo.jpg", "the leftmost child", output_dir="out/")
    """

    def __init__(
        self, segmenter: Segmenter, chat_model: ChatModel, config: AgentConfig | None = None
    ) -> None:
        super().__init__(ImageMedium(segmenter), chat_model, config)
        self.segmenter = segmenter


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion, on a thread of its own inside a running loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def check_query(query: str) -> None:
    """Raise :class:`UserError` for an empty or blank query."""
    if not query or not query.strip():
        raise UserError("the query is empty")
