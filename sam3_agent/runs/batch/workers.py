"""What each engine worker of a batch builds and runs: each request through the agent of its
medium into ``RUN_DIR/<safe id>/``; whatever a request raises is its own failure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.backends.base import ChatModel
from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.jobs.base import ImageSource
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.failures import job_failure
from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource
from sam3_agent.runs.jobs.records import agent_outcome
from sam3_agent.runs.jobs.store import job_dir_name
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import DownloadError, EngineError
from sam3_agent.values.rle import encode_rle


class LazyVideoAgent:
    """A worker's video agents, the first built by ``build`` when a video request asks (a failed
    build fails them all); other frame selections get agents on the same models."""

    def __init__(self, build: Callable[[], Sam3VideoAgent]) -> None:
        self._build = build
        self._task: asyncio.Future[Sam3VideoAgent] | None = None
        self._agents: dict[FrameSelection, Sam3VideoAgent] = {}

    async def get(self, frames: FrameSelection) -> Sam3VideoAgent:
        if self._task is None:
            self._task = asyncio.ensure_future(asyncio.to_thread(self._build))
        first = await asyncio.shield(self._task)
        if frames == first.selection:
            return first
        if frames not in self._agents:
            self._agents[frames] = Sam3VideoAgent(
                first.video_segmenter, first.chat_model, first.config, first.options, frames
            )
        return self._agents[frames]


@dataclass
class BatchHandler:
    """Runs requests through one agent per medium (None where none of it may come)."""

    agent: Sam3Agent | None
    run_dir: Path
    shared: SharedEmbeddings | None = None
    videos: LazyVideoAgent | None = None

    async def run(self, job: BatchRequest, images: ImageSource) -> RequestResult:
        rel_dir = job_dir_name(job.id)
        out = self.run_dir / rel_dir
        started = time.perf_counter()
        written: str | None = rel_dir
        try:
            fields = await self._answer(job, images, out)
        except BaseException as e:
            failure = job_failure("request", job.id, e)
            fields = {"status": "failed", "failure": failure, "infra_error": True}
            # The agent writes its files before an infrastructure error leaves it.
            written = rel_dir if out.is_dir() else None
        return RequestResult(
            id=job.id,
            image_path=job.url or str(job.image_path),
            query=job.query,
            media=job.media,
            time_s=round(time.perf_counter() - started, 4),
            artifacts=written,
            **fields,
        )

    async def _answer(self, job: BatchRequest, images: ImageSource, out: Path) -> dict[str, Any]:
        """The record's fields of an answered request, from the agent of its medium."""
        if job.unavailable is not None:
            raise DownloadError(job.unavailable)
        # A file's request as before: its agent is given no URL keywords.
        fetched: dict[str, Any] = {} if job.url is None else {"downloaded": job.downloaded}
        if job.frames is None:
            if self.agent is None:
                raise EngineError("this worker was built for video requests only")
            image = await images.get(job.image_path, max_pixels=self.agent.config.max_image_pixels)
            if job.url is not None:
                fetched["image_path"] = job.url
            result = await self.agent.arun(image, job.query, output_dir=out, **fetched)
            detections = result.detections if result.status == "masks" else None
            union = detections.union() if detections is not None and len(detections) else None
            return _answered(
                result,
                [] if detections is None else detections.scores,
                pixels=0 if union is None else int(union.sum()),
                prediction=None if union is None or not union.any() else encode_rle(union),
            )
        if self.videos is None:
            raise EngineError("this worker was built without a video agent")
        # A missing or corrupt video fails this request alone, with the loader's one-line
        # reason, before the agent makes its output directory.
        video_agent = await self.videos.get(job.frames)
        answer = await video_agent.arun(job.image_path, job.query, output_dir=out, **fetched)
        tracks = answer.tracks if answer.status == "masks" else None
        pixels = sum(int(tracks.union_mask(p).sum()) for p in tracks.positions()) if tracks else 0
        return _answered(
            answer,
            [] if tracks is None else [t.score for t in tracks],
            pixels=pixels,
            frames=len(answer.video.get("frames_used", ())),
            video_note=answer.video.get("note"),
        )

    def release(self, digest: str) -> None:
        if self.shared is not None:
            self.shared.release(digest)


def _answered(
    result: AgentResult | VideoResult,
    scores: Collection[float],
    *,
    pixels: int,
    prediction: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The fields of an answered request: a mask (or track) per score, ``pixels`` in their
    union, ``prediction`` its COCO RLE (images only)."""
    return {
        **agent_outcome(result),
        "masks": len(scores),
        "mask_pixels": pixels,
        "prediction": prediction,
        "extra": {
            "scores": [round(float(s), 4) for s in scores],
            "usage": result.usage.to_dict(),
            "phrases_tried": list(result.phrases_tried),
            **extra,
        },
    }


@dataclass(frozen=True)
class BatchWorkerFactory(LeavesChatModelOnDriver):
    """One agent per worker and medium the batch holds; SAM 3's video model loads with the
    first video request."""

    backends: ModelSource
    agent_config: AgentConfig
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True
    video_options: VideoOptions = field(default_factory=VideoOptions)
    images: bool = True
    videos: bool = False

    def build(self, run_dir: Path) -> BatchHandler:
        with self.loading():
            chat = self.worker_chat_model()
            shared = self.shared_segmenter() if self.images else None
            agent = None if shared is None else Sam3Agent(shared, chat, self.agent_config)
        videos = LazyVideoAgent(lambda: self.video_agent(chat)) if self.videos else None
        return BatchHandler(agent, run_dir, shared, videos)

    def video_agent(self, chat: ChatModel) -> Sam3VideoAgent:
        """The video agent on SAM 3's video model (loaded now) and the worker's chat model."""
        with self.loading():
            segmenter = self.backends.build_video_segmenter()
            return Sam3VideoAgent(segmenter, chat, self.agent_config, self.video_options)
