"""One batch request through the agent, as the record the results store keeps.

A batch has no ground truth, so its records use the evaluation store's
:class:`~sam3_agent.runs.evaluation.store.SampleResult` with ``split="batch"``, zero
intersection/union/gt area, ``pred_area`` the selected masks' pixel count, and the union
of the masks as ``prediction``. The request's files (``result.json``, ``overlay.png``,
``trace.jsonl``, as ``sam3-agent run`` writes them) go to ``RUN_DIR/<safe id>/``.

As in ``eval``, one request never stops a batch: whatever it raises (endpoint down, an
unreadable image, an error nobody foresaw) is stored as its failure with a one-line message
and run again by ``--retry-failed``; only an interrupt or a cancellation stops the run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.values.detections import encode_rle
from sam3_agent.runs.jobs.base import ImageSource
from sam3_agent.runs.evaluation.runner import (
    SAMPLE_FAILURES,
    SharedEmbeddings,
    failure_message,
    stops_the_run,
)
from sam3_agent.runs.evaluation.store import SampleResult, sample_dir_name
from sam3_agent.agent.result import AgentResult

logger = logging.getLogger(__name__)

BATCH_SPLIT = "batch"


def request_dir(request_id: str) -> str:
    """The request's output directory, relative to the run directory."""
    return sample_dir_name(request_id)


@dataclass
class BatchHandler:
    """Runs requests through one agent; the engine calls :meth:`run` concurrently."""

    agent: Sam3Agent
    run_dir: Path
    shared: SharedEmbeddings | None = None

    async def run(self, job: BatchRequest, images: ImageSource) -> SampleResult:
        rel_dir = request_dir(job.id)
        started = time.perf_counter()
        try:
            image = await images.get(
                job.image_path, max_pixels=self.agent.config.max_image_pixels
            )
            result = await self.agent.arun(image, job.query, output_dir=self.run_dir / rel_dir)
        except BaseException as e:
            if stops_the_run(e):
                raise
            if isinstance(e, SAMPLE_FAILURES):
                # INFO, not WARNING: the progress bar counts failures and the summary lists them.
                logger.info("request %s failed: %s", job.id, failure_message(e))
            else:
                # Whatever else one request raises must not cost the others their run.
                logger.warning("request %s failed: %s", job.id, failure_message(e), exc_info=True)
            elapsed = time.perf_counter() - started
            # The agent writes its files before an infrastructure error leaves it.
            written = rel_dir if (self.run_dir / rel_dir).is_dir() else None
            return failed_record(job, failure_message(e), elapsed, artifacts=written)
        return record(job, result, rel_dir, time.perf_counter() - started)

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


def record(job: BatchRequest, result: AgentResult, rel_dir: str, elapsed: float) -> SampleResult:
    """The stored record of a request the agent answered (``masks``, ``no_mask``, ``failed``)."""
    detections = result.detections if result.status == "masks" else None
    union = detections.union() if detections is not None and len(detections) else None
    total = result.usage.total
    extra: dict[str, Any] = {
        "masks": 0 if detections is None else len(detections),
        "scores": [] if detections is None else [round(float(s), 4) for s in detections.scores],
        "usage": result.usage.to_dict(),
        "phrases_tried": list(result.phrases_tried),
    }
    return SampleResult(
        id=job.id,
        split=BATCH_SPLIT,
        tags=(),
        no_target=False,
        image_path=str(job.image_path),
        query=job.query,
        status=result.status,
        intersection=0,
        union=0,
        pred_area=0 if union is None else int(union.sum()),
        gt_area=0,
        rounds=result.rounds,
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        calls=total.calls,
        time_s=round(elapsed, 4),
        failure=result.failure,
        prediction=None if union is None or not union.any() else encode_rle(union),
        artifacts=rel_dir,
        extra=extra,
    )


def failed_record(
    job: BatchRequest, failure: str, elapsed: float, *, artifacts: str | None = None
) -> SampleResult:
    """The record of a request an infrastructure failure stopped (retried by --retry-failed)."""
    return SampleResult(
        id=job.id,
        split=BATCH_SPLIT,
        tags=(),
        no_target=False,
        image_path=str(job.image_path),
        query=job.query,
        status="failed",
        intersection=0,
        union=0,
        pred_area=0,
        gt_area=0,
        time_s=round(elapsed, 4),
        failure=failure,
        infra_error=True,
        artifacts=artifacts,
        extra={"masks": 0},
    )
