"""A session's result fields, and the result of an ended session read back without any model."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sam3_agent.agent import prompts, rundir, tools
from sam3_agent.agent.checkpoint import Checkpoint, Ending, Fingerprint, SessionState
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.agent.steps import Final
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ResumeError
from sam3_agent.values.images import RGBImage


def rounds_spent(max_rounds: int) -> str:
    """The ``failure`` of a session that spent its rounds without an answer."""
    return f"max_rounds ({max_rounds}) reached without an answer"


def result_fields(
    state: SessionState,
    *,
    query: str,
    ending: Ending,
    model: str,
    config: AgentConfig,
    token_count: str,
    prompt_set: PromptSet,
) -> dict[str, Any]:
    """The :class:`~sam3_agent.agent.result.SessionResult` fields of a session that ended
    with ``ending`` (its ``final`` None: failed); ``token_count``: how tokens were counted."""
    return {
        "query": query,
        "status": "failed" if ending.final is None else ending.final.status,
        "rounds": state.round,
        "usage": state.usage,
        "timings": dict(state.timings),
        "model": model,
        "failure": ending.failure,
        "phrases_tried": list(state.phrases),
        "context": {
            "policy": config.context_policy,
            "max_context_tokens": config.max_context_tokens,
            "reserve_tokens": config.context_reserve_tokens,
            "watermark": config.context_watermark,
            "token_count": token_count,
        },
        "prompts": prompt_set.describe(),
    }


def finish_ended(
    directory: Path,
    image: RGBImage,
    query: str,
    *,
    config: AgentConfig,
    image_path: str | Path | None = None,
    exports: Iterable[ExportFormat] = (),
    downloaded: dict[str, Any] | None = None,
) -> AgentResult:
    """The result of the ended session saved in ``directory``, its outputs written again as
    a resume with the models would (check first with ``checkpoint.check_resumable``);
    ``downloaded``: the fetched input's record, as :meth:`Sam3Agent.run` takes it."""
    started = time.perf_counter()
    now = Fingerprint.of(query=query, image=image, config=config, model=None)
    checkpoint = Checkpoint.resume(directory, now)
    try:
        state = checkpoint.restore(image.shape[:2])
        if state.ending is None and state.round < config.max_rounds:
            raise ResumeError(
                f"cannot finish {directory} without the models: its session has not ended"
            )
        ending = state.ending or Ending(None, rounds_spent(config.max_rounds))
        own = checkpoint.prompt_set or prompts.load_prompt_set(
            config.prompts_dir, tool_docs=tools.tool_docs(), tool_set=config.tool_set
        )
        before = checkpoint.started_with
        # The session's own total: finishing it here is no work on it.
        total = state.timings.get("total", time.perf_counter() - started)
        state.timings = {**state.timings, "total": total}
        fields = result_fields(
            state,
            query=query,
            ending=ending,
            model=str(before.settings.get("model", "")) if before is not None else "",
            config=config,
            token_count=state.usage.estimate_source,  # as the session counted them
            prompt_set=own,
        )
        path = str(image_path) if image_path is not None else None
        result = image_result(fields, ending.final, image.shape[:2], path)
        result.downloaded = downloaded
        rundir.write_run(directory, result, image, exports)
    finally:
        checkpoint.close()
    return result


def image_result(
    fields: dict[str, Any],
    final: Final[Detections] | None,
    image_size: tuple[int, int],
    image_path: str | None,
) -> AgentResult:
    h, w = image_size
    detections = Detections.empty(h, w) if final is None else final.detections
    return AgentResult(**fields, detections=detections, image_size=(h, w), image_path=image_path)
