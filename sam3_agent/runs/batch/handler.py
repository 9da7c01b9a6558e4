"""One batch request through the agent, as the record the results store keeps.

A request's files go to ``RUN_DIR/<safe id>/``: for an image, ``result.json``,
``overlay.png`` and ``trace.jsonl`` as ``sam3-agent run`` writes them; for a video,
``result.json`` (tracks in the YouTube-VIS layout), ``overlay.mp4``, ``contact_sheet.png``
and ``trace.jsonl`` as ``sam3-agent track`` writes them. As in ``eval``, one request never
stops a batch
(:mod:`~sam3_agent.runs.jobs.failures`): whatever it raises (a missing or corrupt video
included) is stored as its failure and run again by ``--retry-failed``.

A worker's video agent is built on its first video request (:class:`LazyVideoAgent`): SAM 3's
video model loads only on workers that are given a video.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.agent.video.result import VideoResult
from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.jobs.base import ImageSource
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.failures import job_failure
from sam3_agent.runs.jobs.records import agent_outcome
from sam3_agent.runs.jobs.store import job_dir_name
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import EngineError
from sam3_agent.values.rle import encode_rle


def request_dir(request_id: str) -> str:
    """The request's output directory, relative to the run directory."""
    return job_dir_name(request_id)


class LazyVideoAgent:
    """A worker's video agents, the first built by ``build`` when the first video request
    asks for one.

    The build runs once, in a thread, however many requests wait for it; a request cancelled
    while waiting does not cancel it. When it fails, every video request of the worker fails
    with that error (a model that cannot load is not loaded again for each request). Requests
    tracking other frames get agents of their own on the same models.
    """

    def __init__(self, build: Callable[[], Sam3VideoAgent]) -> None:
        self._build = build
        self._task: asyncio.Future[Sam3VideoAgent] | None = None
        self._agents: dict[FrameSelection, Sam3VideoAgent] = {}

    @property
    def built(self) -> bool:
        """Whether the build has started (a video request arrived)."""
        return self._task is not None

    async def get(self, frames: FrameSelection) -> Sam3VideoAgent:
        """The agent tracking ``frames`` of the videos it is given; the models are built on
        the first call."""
        if self._task is None:
            self._task = asyncio.ensure_future(asyncio.to_thread(self._build))
        first = await asyncio.shield(self._task)
        agent = self._agents.get(frames)
        if agent is None:
            if frames == first.selection:
                agent = first
            else:
                agent = Sam3VideoAgent(
                    first.video_segmenter, first.chat_model, first.config, first.options, frames
                )
            self._agents[frames] = agent
        return agent


@dataclass
class BatchHandler:
    """Runs requests through one agent per medium; the engine calls :meth:`run` concurrently.

    ``agent`` answers image requests (None on a worker given videos only), ``videos`` video
    requests (None where none may come).
    """

    agent: Sam3Agent | None
    run_dir: Path
    shared: SharedEmbeddings | None = None
    videos: LazyVideoAgent | None = None

    async def run(self, job: BatchRequest, images: ImageSource) -> RequestResult:
        rel_dir = request_dir(job.id)
        out = self.run_dir / rel_dir
        started = time.perf_counter()
        try:
            if job.frames is None:
                agent = self._image_agent()
                image = await images.get(job.image_path, max_pixels=agent.config.max_image_pixels)
                result = await agent.arun(image, job.query, output_dir=out)
                return record(job, result, rel_dir, time.perf_counter() - started)
            # A missing or corrupt video fails this request alone, with the loader's one-line
            # reason, before the agent makes its output directory.
            video_agent = await self._video_agent(job.frames)
            answer = await video_agent.arun(job.image_path, job.query, output_dir=out)
            return video_record(job, answer, rel_dir, time.perf_counter() - started)
        except BaseException as e:
            failure = job_failure("request", job.id, e)
            elapsed = time.perf_counter() - started
            # The agent writes its files before an infrastructure error leaves it.
            written = rel_dir if out.is_dir() else None
            return failed_record(job, failure, elapsed, artifacts=written)

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)

    def _image_agent(self) -> Sam3Agent:
        if self.agent is None:
            raise EngineError("this worker was built for video requests only")
        return self.agent

    async def _video_agent(self, frames: FrameSelection) -> Sam3VideoAgent:
        if self.videos is None:
            raise EngineError("this worker was built without a video agent")
        return await self.videos.get(frames)


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


def video_record(
    job: BatchRequest, result: VideoResult, rel_dir: str, elapsed: float
) -> RequestResult:
    """The record of a video request the agent answered: ``masks`` counts the selected
    tracks and ``mask_pixels`` sums their union's pixels over the frames used; the tracks
    themselves are in the request's ``result.json`` (no ``prediction``)."""
    tracks = result.tracks if result.status == "masks" else None
    pixels = 0
    if tracks is not None:
        pixels = sum(int(tracks.union_mask(p).sum()) for p in tracks.positions())
    extra: dict[str, Any] = {
        "scores": [] if tracks is None else [round(float(t.score), 4) for t in tracks],
        "usage": result.usage.to_dict(),
        "phrases_tried": list(result.phrases_tried),
        "frames": len(result.video.get("frames_used", ())),
        "video_note": result.video.get("note"),
    }
    return RequestResult(
        id=job.id,
        image_path=str(job.image_path),
        query=job.query,
        **agent_outcome(result),
        masks=0 if tracks is None else len(tracks),
        mask_pixels=pixels,
        time_s=round(elapsed, 4),
        artifacts=rel_dir,
        media="video",
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
        media=job.media,
    )
