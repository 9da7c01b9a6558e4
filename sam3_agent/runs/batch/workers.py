"""What each engine worker of a batch builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`BatchWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent is
imported there too, so naming the factory imports no numpy. SAM 3's video model is not loaded
there: the handler builds the video agent when the worker's first video request arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, VideoModelSource
from sam3_agent.values.config import AgentConfig, VideoOptions

if TYPE_CHECKING:
    from sam3_agent.agent.video.agent import Sam3VideoAgent
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.batch.handler import BatchHandler


@dataclass(frozen=True)
class BatchWorkerFactory(LeavesChatModelOnDriver):
    """One agent per worker and medium: SAM 3 (or its service client) and the MLLM client
    (see :class:`~sam3_agent.runs.jobs.models.LeavesChatModelOnDriver` for those fields);
    ``backends`` builds SAM 3's video model too, where a video request arrives.

    ``images`` / ``videos``: the batch holds requests of that medium (a batch of videos only
    loads no image model).
    """

    backends: VideoModelSource
    agent_config: AgentConfig
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True
    video_options: VideoOptions = field(default_factory=VideoOptions)
    images: bool = True
    videos: bool = False

    def build(self, run_dir: Path) -> BatchHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.batch.handler import BatchHandler, LazyVideoAgent

        with self.loading():
            chat = self.worker_chat_model()
            shared = self.shared_segmenter() if self.images else None
            agent = None if shared is None else Sam3Agent(shared, chat, self.agent_config)
        videos = None
        if self.videos:

            def build_video_agent() -> Sam3VideoAgent:
                return self.video_agent(chat)

            videos = LazyVideoAgent(build_video_agent)
        return BatchHandler(agent, run_dir, shared, videos)

    def video_agent(self, chat: ChatModel) -> Sam3VideoAgent:
        """The video agent on SAM 3's video model (loaded now) and the worker's chat model."""
        from sam3_agent.agent.video.agent import Sam3VideoAgent

        with self.loading():
            segmenter = self.backends.build_video_segmenter()
            return Sam3VideoAgent(segmenter, chat, self.agent_config, self.video_options)
