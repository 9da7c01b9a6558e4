"""The agent loop: the MLLM calls tools on SAM 3 until it selects masks or gives up.

One :class:`Sam3Agent` is built once with its two backends and answers many requests;
each request gets its own :class:`~sam3_agent.session.Session`. Model mistakes never
raise: they become corrective messages, bounded by ``max_corrections``. Infrastructure
failures raise a :class:`~sam3_agent.errors.Sam3AgentError` subclass.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent import prompts, tools
from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.checkpoint import Checkpoint, Ending, Fingerprint, saved_prompt_set
from sam3_agent.config import AgentConfig
from sam3_agent.context import (
    Context,
    ContextBudgetError,
    ContextPolicy,
    History,
    Tokens,
    counter_for,
)
from sam3_agent.context.accounting import digest_recorder
from sam3_agent.context.base import restore_policy_state, save_policy_state
from sam3_agent.context.registry import PolicyInputs, build_policy, check_backend
from sam3_agent.echo import echo
from sam3_agent.errors import Sam3AgentError, UserError
from sam3_agent.images import EncodedImage, ImageInput, RGBImage, load_image
from sam3_agent.messages import ChatResponse, NativeToolCall, TokenUsage
from sam3_agent.outputs import atomic_write_json, write_png
from sam3_agent.parsing import ParsedReply, parse_native, parse_reply
from sam3_agent.render import legend, overlay
from sam3_agent.result import AgentResult
from sam3_agent.session import Session
from sam3_agent.steps import ActionStep, Observation, TaskStep
from sam3_agent.tools import Final, ToolMistake, ToolOutcome

logger = logging.getLogger(__name__)


STOPPED = "stopped before the session ended"
"""The ``failure`` of a session whose task was cancelled (a stop button, a closed page)."""


@dataclass(frozen=True)
class MaskCheck:
    """One mask's isolated check in an ``examine_each_mask`` round.

    Attributes:
        number: the mask's 1-based number on the image shown before the check.
        accepted: the checker's verdict (a reply without a clear verdict counts as Reject).
        reply: the checker's last reply, reasoning included.
        mask_image: the whole image with only this mask drawn, as the checker saw it.
        zoom_image: the close-up of the mask beside the raw crop, as the checker saw it.
    """

    number: int
    accepted: bool
    reply: str
    mask_image: EncodedImage
    zoom_image: EncodedImage


@dataclass(frozen=True)
class RoundEvent:
    """One finished main round, as the CLI's status line and the web demo show it.

    Attributes:
        round: 1-based number of the main MLLM call.
        tool: the tool called, None when the reply had no readable call.
        kind: how the round ended: ``segment``, ``examine``, ``final`` or ``correction``.
        summary: the first sentence of what went back to the model.
        reasoning: the model's reasoning (its reasoning channel, else its ``<think>`` text).
        parameters: the tool call's parameters as the model wrote them.
        observation: the whole message sent back to the model ("" after a final tool).
        image: the numbered masks image sent back, when there was one.
        checks: the per-mask verdicts of an ``examine_each_mask`` round, in mask order.
        usage: tokens of this round: its main call plus its mask checks.
        seconds: wall time of the round, the model's answer and the tool's work.
    """

    round: int
    tool: str | None
    kind: str
    summary: str
    reasoning: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    image: EncodedImage | None = None
    checks: tuple[MaskCheck, ...] = ()
    usage: TokenUsage = field(default_factory=TokenUsage)
    seconds: float = 0.0


RoundCallback = Callable[[RoundEvent], None]


class Sam3Agent:
    """An MLLM that segments what a request describes, using SAM 3 as a tool.

    Example::

        agent = Sam3Agent(segmenter, chat_model, AgentConfig(max_rounds=5))
        result = agent.run("photo.jpg", "the leftmost child", output_dir="out/")
    """

    def __init__(
        self, segmenter: Segmenter, chat_model: ChatModel, config: AgentConfig | None = None
    ) -> None:
        self.segmenter = segmenter
        self.chat_model = chat_model
        self.config = config or AgentConfig()
        self.prompts = prompts.load_prompt_set(self.config.prompts_dir)
        # Rendered once: the same bytes open every conversation, so servers can cache them.
        self.system_prompt = self.prompts.render(
            "system", tools=tools.tool_docs(), protocol=self.config.tool_protocol
        )
        self.checker_prompt = self.prompts.render("checker_system")
        self._tool_specs = tools.tool_specs() if self.config.tool_protocol == "native" else None
        check_backend(self.config, chat_model)  # e.g. attention without transformers: refuse now
        self.token_counter = counter_for(chat_model)

    def run(
        self,
        image: ImageInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
    ) -> AgentResult:
        """Blocking form of :meth:`arun`; also works where an event loop is already running."""
        coro_args = (image, query)
        kwargs: dict[str, Any] = {"output_dir": output_dir, "on_round": on_round, "resume": resume}
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(*coro_args, **kwargs))
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.arun(*coro_args, **kwargs)).result()

    async def arun(
        self,
        image: ImageInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
    ) -> AgentResult:
        """Answer ``query`` on ``image``; see :meth:`_arun`.

        The session's tool results, corrections, checks and context render with this agent's
        prompt set (``config.prompts_dir``), whatever other agents run alongside.
        """
        with prompts.using(self._session_prompts(output_dir, resume)):
            return await self._arun(
                image, query, output_dir=output_dir, on_round=on_round, resume=resume
            )

    def _session_prompts(self, output_dir: str | Path | None, resume: bool) -> prompts.PromptSet:
        """This agent's prompt set; for a resumed session, the set it started with."""
        if resume and output_dir is not None:
            saved = saved_prompt_set(Path(output_dir))
            if saved is not None:
                return prompts.PromptSet(saved["name"], saved["path"], saved["sources"])
        return self.prompts

    async def _arun(
        self,
        image: ImageInput,
        query: str,
        *,
        output_dir: str | Path | None = None,
        on_round: RoundCallback | None = None,
        resume: bool = False,
    ) -> AgentResult:
        """Answer ``query`` on ``image`` (a path, PIL image or ``(H, W, 3)`` uint8 array).

        With ``output_dir``, ``result.json``, ``overlay.png`` and ``trace.jsonl`` are written
        there (also when the session fails, and before an infrastructure error propagates),
        and the session's state is committed there after every round
        (:mod:`sam3_agent.checkpoint`). With ``resume=True`` the session saved in
        ``output_dir`` continues from its last committed round, with the prompts it started
        with; calls that had finished are not made again.

        Raises:
            UserError: empty query. ImageLoadError: unreadable image.
            ResumeError: nothing to resume, or a different image, query or settings.
            ChatModelError, SegmenterError: a backend failed.
        """
        check_query(query)
        started = time.perf_counter()
        out = Path(output_dir) if output_dir is not None else None
        # Decoding, downscaling and encoding a large photo takes a while: keep the event loop
        # free for the other sessions of a batch evaluation.
        session, checkpoint = await asyncio.to_thread(self._new_session, image, query, out, resume)
        raw = session.image
        session.start()
        image_path = str(image) if isinstance(image, (str, Path)) else None
        final: Final | None = None
        failure: str | None = None
        try:
            final, failure = await self._loop(session, on_round, checkpoint)
        except (Sam3AgentError, asyncio.CancelledError) as e:
            # A stopped session (its task cancelled) also leaves what it has on disk.
            stopped = isinstance(e, asyncio.CancelledError)
            reason = STOPPED if stopped else f"{type(e).__name__}: {e}"
            result = self._result(session, query, image_path, None, reason, started)
            await asyncio.to_thread(self._write, result, out, raw)
            raise
        finally:
            await session.close()
            checkpoint.close()  # the run directory is free for a resume
        result = self._result(session, query, image_path, final, failure, started)
        # A full-size overlay's PNG encode and fsync take a second on a large photo: off the
        # event loop, which the other sessions of a batch evaluation share.
        await asyncio.to_thread(self._write, result, out, raw)
        return result

    def _new_session(
        self, image: ImageInput, query: str, out: Path | None, resume: bool = False
    ) -> tuple[Session, Checkpoint]:
        # First, so a bad image leaves no output directory behind.
        pixels = load_image(image, max_pixels=self.config.max_image_pixels)
        checkpoint = self._checkpoint(pixels, query, out, resume)
        session = Session(
            config=self.config,
            segmenter=checkpoint.segmenter(self.segmenter),
            chat_model=checkpoint.chat_model(self.chat_model),
            image=pixels,
            query=query,
            checker_prompt=checkpoint.checker_prompt,
            trace=checkpoint.trace,
            token_counter=self.token_counter,
        )
        return session, checkpoint

    def _checkpoint(
        self, pixels: RGBImage, query: str, out: Path | None, resume: bool
    ) -> Checkpoint:
        """Where the session's state is committed; on resume, the saved session's prompts."""
        if out is None:
            if resume:
                raise UserError("resume needs the output directory of the session to continue")
            return Checkpoint.disabled(
                system_prompt=self.system_prompt, checker_prompt=self.checker_prompt
            )
        fingerprint = Fingerprint.of(
            query=query, image=pixels, config=self.config, model=self.chat_model.name
        )
        if resume:
            return Checkpoint.resume(out, fingerprint)
        return Checkpoint.start(
            out,
            fingerprint,
            system_prompt=self.system_prompt,
            checker_prompt=self.checker_prompt,
            prompt_set={
                "name": self.prompts.name,
                "path": self.prompts.path,
                "sources": self.prompts.sources,
            },
        )

    async def _loop(
        self, session: Session, on_round: RoundCallback | None, checkpoint: Checkpoint
    ) -> tuple[Final | None, str | None]:
        task = TaskStep(session.query, session.task_image)
        restored = checkpoint.restore(session)
        if restored.ending is not None:
            return restored.ending.final, restored.ending.failure
        # After the restore: the policy's digest accounting adds to the restored usage, and
        # its state (digests, mode, attention) continues from the last committed round.
        policy = self._context_policy(session)
        restore_policy_state(policy, restored.context)
        try:
            return await self._rounds(
                session, on_round, task, restored.steps, restored.corrections, policy, checkpoint
            )
        finally:
            aclose = getattr(policy, "aclose", None)
            if aclose is not None:
                await aclose()

    def _context_policy(self, session: Session) -> ContextPolicy:
        session.usage.estimate_source = self.token_counter.source
        on_digest = digest_recorder(
            session.usage, session.trace, self.token_counter, lambda: session.round
        )
        # The session's (journaled) model: a digest call is replayed on resume like any other.
        inputs = PolicyInputs(self.config, self.token_counter, session.chat_model, on_digest)
        return build_policy(inputs)

    async def _rounds(
        self,
        session: Session,
        on_round: RoundCallback | None,
        task: TaskStep,
        steps: list[ActionStep],
        corrections: int,
        policy: ContextPolicy,
        checkpoint: Checkpoint,
    ) -> tuple[Final | None, str | None]:
        # The resumed session's own system prompt (the one its earlier rounds were sent).
        system_prompt = checkpoint.system_prompt
        while True:
            if session.round >= self.config.max_rounds:
                return None, f"max_rounds ({self.config.max_rounds}) reached without an answer"
            try:
                with session.timed("context"):
                    context = await policy.build(History(system_prompt, task, steps))
            except ContextBudgetError as e:
                return None, str(e)
            session.round += 1
            round_started = time.perf_counter()
            with session.timed("chat"):
                response = await session.chat_model.complete(
                    context.messages, tools=self._tool_specs
                )
            chat_s = time.perf_counter() - round_started
            session.usage.main = session.usage.main + response.usage
            session.usage.cached_calls += int(response.cached)
            parsed = self._parse(response, session.round)
            outcome = await self._act(session, parsed)
            if outcome.kind == "correction":
                corrections += 1
            # A native call is replayed as a structured call next to the visible text.
            reply = response.text if parsed.native_call is not None else parsed.stored_text
            native_call = parsed.native_call
            if outcome.kind == "correction":
                reply, native_call = _bounded_replay(reply, native_call)
            step = ActionStep(
                round=session.round,
                reply=reply,
                kind=outcome.kind,
                observation=outcome.observation,
                call=parsed.call,
                phrase=outcome.phrase,
                native_call=native_call,
            )
            # Counted on the loop (the tokenizer is shared by every session of the process);
            # the usage estimate is kept whether or not a trace is written.
            tokens = self.token_counter.messages(context.messages)
            session.usage.add_estimate("main", tokens.text, tokens.image)
            if session.trace.enabled:
                per_message = self.token_counter.per_message(context.messages)
                # Image saves and the record's write are file work: off the event loop, awaited
                # here so records keep their order.
                await asyncio.to_thread(
                    self._record,
                    session,
                    context=context,
                    response=response,
                    parsed=parsed,
                    step=step,
                    tokens=tokens,
                    per_message=per_message,
                    latency_s=chat_s,
                    round_s=time.perf_counter() - round_started,
                )
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
            policy_state = None if ending is not None else await save_policy_state(policy)
            # Off the event loop: encoding masks and syncing files must not hold up the other
            # sessions of a batch evaluation.
            await asyncio.to_thread(
                checkpoint.commit, session, steps, corrections, ending, policy_state
            )
            if on_round is not None:
                seconds = time.perf_counter() - round_started
                on_round(_event(step, response, parsed, session, seconds))
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

    async def _act(self, session: Session, parsed: ParsedReply) -> ToolOutcome:
        try:
            if parsed.call is None:
                kind = parsed.mistake or "no_tool"
                args = {"detail": echo(parsed.detail)} if kind == "invalid_json" else {}
                raise ToolMistake(prompts.feedback(kind, **args))
            return await tools.execute(session, parsed.call)
        except ToolMistake as mistake:
            return ToolOutcome("correction", Observation(str(mistake)))

    def _record(
        self,
        session: Session,
        *,
        context: Context,
        response: ChatResponse,
        parsed: ParsedReply,
        step: ActionStep,
        tokens: Tokens,
        per_message: list[int],
        latency_s: float = 0.0,
        round_s: float = 0.0,
    ) -> None:
        """Write the round's trace record (file work: called off the event loop)."""
        trace = session.trace
        trace.record(
            {
                "kind": "main",
                "round": step.round,
                "context": trace.messages(context.messages, system_ref="system_prompt.txt"),
                "pruning": {
                    "kept_rounds": context.kept_rounds,
                    "dropped_rounds": context.dropped_rounds,
                    "images_replaced_by_text": context.images_replaced,
                    "tried_phrases_note": context.tried_phrases,
                },
                "reply": response.text,
                "reasoning": response.reasoning,
                "thinking": parsed.thinking,
                "finish_reason": response.finish_reason,
                "cut_after_first_tool": parsed.cut,
                "ignored_after_json": parsed.ignored,
                "tool_call": (
                    {"name": parsed.call.name, "parameters": parsed.call.parameters}
                    if parsed.call
                    else None
                ),
                "outcome": {
                    "kind": step.kind,
                    "text": step.observation.text,
                    "image": (
                        trace.save_image(step.observation.image)
                        if step.observation.image is not None
                        else None
                    ),
                },
                "usage": response.usage.to_dict(),
                "tokens_estimate": {
                    **tokens.to_dict(),
                    "per_message": per_message,
                    "source": self.token_counter.source,
                },
                "context_policy": (
                    context.eviction.to_dict() if context.eviction is not None else None
                ),
                "cached": response.cached,
                "latency_s": round(latency_s, 4),  # the MLLM call
                "round_s": round(round_s, 4),  # the call and the tool, checks included
            }
        )

    def _result(
        self,
        session: Session,
        query: str,
        image_path: str | None,
        final: Final | None,
        failure: str | None,
        started: float,
    ) -> AgentResult:
        h, w = session.image.shape[:2]
        timings = dict(session.timings)
        timings["total"] = time.perf_counter() - started
        return AgentResult(
            query=query,
            status="failed" if final is None else final.status,
            detections=session.empty_detections() if final is None else final.detections,
            image_size=(h, w),
            rounds=session.round,
            usage=session.usage,
            timings=timings,
            model=self.chat_model.name,
            image_path=image_path,
            failure=failure,
            phrases_tried=list(session.phrases),
            context=self._context_settings(),
            prompts=prompts.active().describe(),  # a resumed session's own set
        )

    def _context_settings(self) -> dict[str, Any]:
        c = self.config
        return {
            "policy": c.context_policy,
            "max_context_tokens": c.max_context_tokens,
            "reserve_tokens": c.context_reserve_tokens,
            "watermark": c.context_watermark,
            "token_count": self.token_counter.source,
        }

    @staticmethod
    def _write(result: AgentResult, out: Path | None, image: Any) -> None:
        if out is None:
            return
        result.output_dir = out
        atomic_write_json(out / "result.json", result.to_json())
        canvas = overlay(image, result.detections)
        write_png(out / "overlay.png", legend(canvas, result.query, result.detections))


def check_query(query: str) -> None:
    """Raise :class:`UserError` for a query the agent cannot work on (empty or blank)."""
    if not query or not query.strip():
        raise UserError("the query is empty")


REPLAY_LIMIT = 2000
"""Characters of a refused reply replayed in later contexts (the trace keeps all of it)."""


def _bounded_replay(reply: str, call: NativeToolCall | None) -> tuple[str, NativeToolCall | None]:
    """A refused reply as later contexts show it: cut to :data:`REPLAY_LIMIT` characters, so
    a megabyte the model wrote once is not sent back with every following round. A native
    call's arguments that long are replayed as ``{}`` (they must stay valid JSON)."""
    if call is not None and len(call.arguments) + len(call.name) > REPLAY_LIMIT:
        call = NativeToolCall(echo(call.name), "{}", id=call.id)
    return echo(reply, REPLAY_LIMIT), call


def _event(
    step: ActionStep,
    response: ChatResponse,
    parsed: ParsedReply,
    session: Session,
    seconds: float,
) -> RoundEvent:
    tool = step.call.name if step.call else None
    summary = step.observation.text.split(". ")[0] if step.observation.text else tool or ""
    checks: list[MaskCheck] = []
    usage = response.usage
    if step.kind == "examine":  # only an executed examine_each_mask ran checks this round
        for request, result in session.last_checks:
            reply = result.replies[-1] if result.replies else ""
            checks.append(
                MaskCheck(
                    request.number, result.accepted, reply, request.mask_image, request.zoom_image
                )
            )
            usage = usage + result.usage
    return RoundEvent(
        round=step.round,
        tool=tool,
        kind=step.kind,
        summary=summary,
        reasoning=(response.reasoning or parsed.thinking or "").strip(),
        parameters=dict(step.call.parameters) if step.call else {},
        observation=step.observation.text,
        image=step.observation.image,
        checks=tuple(checks),
        usage=usage,
        seconds=seconds,
    )
