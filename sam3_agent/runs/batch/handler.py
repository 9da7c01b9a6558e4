"""One batch request through the agent, as the record the results store keeps.

A request's files (``result.json``, ``overlay.png``, ``trace.jsonl``, as ``sam3-agent run``
writes them) go to ``RUN_DIR/<safe id>/``; its record
(:class:`~sam3_agent.runs.batch.results.RequestResult`) holds its outcome and the union of its
masks. As in ``eval``, one request never stops a batch
(:mod:`~sam3_agent.runs.jobs.failures`): whatever it raises is stored as its failure and run
again by ``--retry-failed``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult
from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.jobs.base import ImageSource
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.failures import job_failure
from sam3_agent.runs.jobs.records import agent_outcome
from sam3_agent.runs.jobs.store import job_dir_name
from sam3_agent.values.detections import encode_rle


def request_dir(request_id: str) -> str:
    """The request's output directory, relative to the run directory."""
    return job_dir_name(request_id)


@dataclass
class BatchHandler:
    """Runs requests through one agent; the engine calls :meth:`run` concurrently."""

    agent: Sam3Agent
    run_dir: Path
    shared: SharedEmbeddings | None = None

    async def run(self, job: BatchRequest, images: ImageSource) -> RequestResult:
        rel_dir = request_dir(job.id)
        started = time.perf_counter()
        try:
            image = await images.get(job.image_path, max_pixels=self.agent.config.max_image_pixels)
            result = await self.agent.arun(image, job.query, output_dir=self.run_dir / rel_dir)
        except BaseException as e:
            failure = job_failure("request", job.id, e)
            elapsed = time.perf_counter() - started
            # The agent writes its files before an infrastructure error leaves it.
            written = rel_dir if (self.run_dir / rel_dir).is_dir() else None
            return failed_record(job, failure, elapsed, artifacts=written)
        return record(job, result, rel_dir, time.perf_counter() - started)

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


def record(job: BatchRequest, result: AgentResult, rel_dir: str, elapsed: float) -> RequestResult:
    """The record of a request the agent answered (``masks``, ``no_mask``, ``failed``)."""
    detections = result.detections if result.status == "masks" else None
    union = detections.union() if detections is not None and len(detections) else None
    extra: dict[str, Any] = {
        "scores": [] if detections is None else [round(float(s), 4) for s in detections.scores],
        "usage": result.usage.to_dict(),
        "phrases_tried": list(result.phrases_tried),
    }
    return RequestResult(
        id=job.id,
        image_path=str(job.image_path),
        query=job.query,
        **agent_outcome(result),
        masks=0 if detections is None else len(detections),
        mask_pixels=0 if union is None else int(union.sum()),
        time_s=round(elapsed, 4),
        prediction=None if union is None or not union.any() else encode_rle(union),
        artifacts=rel_dir,
        extra=extra,
    )


def failed_record(
    job: BatchRequest, failure: str, elapsed: float, *, artifacts: str | None = None
) -> RequestResult:
    """The record of a request an infrastructure failure stopped (retried by --retry-failed)."""
    return RequestResult(
        id=job.id,
        image_path=str(job.image_path),
        query=job.query,
        status="failed",
        time_s=round(elapsed, 4),
        failure=failure,
        infra_error=True,
        artifacts=artifacts,
    )
