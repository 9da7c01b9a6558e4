"""What each engine worker of a video evaluation builds (picklable, for Ray actors).

The video counterpart of :class:`~sam3_agent.runs.evaluation.workers.EvalWorkerFactory`: it
carries settings, never models; :meth:`VideoEvalWorkerFactory.build` loads SAM 3's video
model (or its service client) and the MLLM where the work runs, and the agent and runner are
imported there, so naming the factory imports no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, VideoModelSource
from sam3_agent.values.config import AgentConfig, VideoOptions

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.evaluation.video.runner import VideoEvalHandler


@dataclass(frozen=True)
class VideoEvalWorkerFactory(LeavesChatModelOnDriver):
    """The video agent per worker.

    ``options``: what the agent shows the MLLM; ``model`` names the MLLM in each result;
    for the other fields see :class:`~sam3_agent.runs.jobs.models.LeavesChatModelOnDriver`.
    """

    backends: VideoModelSource
    agent_config: AgentConfig
    options: VideoOptions
    model: str
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True

    def build(self, run_dir: Path) -> VideoEvalHandler:
        from sam3_agent.agent.video.agent import Sam3VideoAgent
        from sam3_agent.runs.evaluation.video.runner import VideoAgentPredictor, VideoEvalHandler

        with self.loading():
            agent = Sam3VideoAgent(
                self.backends.build_video_segmenter(),
                self.worker_chat_model(),
                self.agent_config,
                self.options,
            )
        return VideoEvalHandler(VideoAgentPredictor(agent, self.model), run_dir)
