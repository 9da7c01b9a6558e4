"""What each engine worker of an evaluation builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`EvalWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent and
the handlers are imported there too, so naming the factory imports no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource, VideoModelSource
from sam3_agent.values.config import AgentConfig, VideoOptions

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.evaluation.handler import EvalHandler
    from sam3_agent.runs.evaluation.video.handler import VideoEvalHandler


@dataclass(frozen=True)
class EvalWorkerFactory(LeavesChatModelOnDriver):
    """The evaluation predictor per worker: the agent, SAM 3 alone (``sam3_only``), or the
    video agent (``video`` set: what it shows the MLLM; ``backends`` then builds SAM 3's
    video model, a :class:`~sam3_agent.runs.jobs.models.VideoModelSource`).

    ``model`` is the name recorded with each result (the MLLM's, or SAM 3's for
    sam3-only); for the other fields see
    :class:`~sam3_agent.runs.jobs.models.LeavesChatModelOnDriver`.
    """

    backends: ModelSource
    agent_config: AgentConfig
    sam3_only: bool
    model: str
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True
    video: VideoOptions | None = None

    def build(self, run_dir: Path) -> EvalHandler | VideoEvalHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.agent.video.agent import Sam3VideoAgent
        from sam3_agent.runs.evaluation.handler import (
            AgentPredictor,
            EvalHandler,
            Predictor,
            Sam3OnlyPredictor,
        )
        from sam3_agent.runs.evaluation.video.handler import VideoAgentPredictor, VideoEvalHandler

        predictor: Predictor
        with self.loading():
            if self.video is not None:
                segmenter = cast("VideoModelSource", self.backends).build_video_segmenter()
                tracker = Sam3VideoAgent(
                    segmenter, self.worker_chat_model(), self.agent_config, self.video
                )
                return VideoEvalHandler(VideoAgentPredictor(tracker, self.model), run_dir)
            shared = self.shared_segmenter()
            if self.sam3_only:
                predictor = Sam3OnlyPredictor(shared, self.model, config=self.agent_config)
            else:
                agent = Sam3Agent(shared, self.worker_chat_model(), self.agent_config)
                predictor = AgentPredictor(agent, self.model)
        return EvalHandler(
            predictor, run_dir, shared, max_pixels=self.agent_config.max_image_pixels
        )
