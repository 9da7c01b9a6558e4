"""What each engine worker of an evaluation builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`EvalWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent and
the runner are imported there too, so naming the factory imports no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.evaluation.runner import EvalHandler


@dataclass(frozen=True)
class EvalWorkerFactory(LeavesChatModelOnDriver):
    """The evaluation predictor per worker: the agent, or SAM 3 alone (``sam3_only``).

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

    def build(self, run_dir: Path) -> EvalHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.evaluation.runner import (
            AgentPredictor,
            EvalHandler,
            Predictor,
            Sam3OnlyPredictor,
        )

        predictor: Predictor
        with self.loading():
            shared = self.shared_segmenter()
            if self.sam3_only:
                predictor = Sam3OnlyPredictor(shared, self.model, config=self.agent_config)
            else:
                agent = Sam3Agent(shared, self.worker_chat_model(), self.agent_config)
                predictor = AgentPredictor(agent, self.model)
        return EvalHandler(
            predictor, run_dir, shared, max_pixels=self.agent_config.max_image_pixels
        )
