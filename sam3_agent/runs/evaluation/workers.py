"""What each engine worker of an evaluation builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`EvalWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent and
the runner are imported there too, so naming the factory imports no numpy.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource, loading_bars_hidden
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.evaluation.runner import EvalHandler


@dataclass(frozen=True)
class EvalWorkerFactory(LeavesChatModelOnDriver):
    """The evaluation predictor per worker: the agent, or SAM 3 alone (``sam3_only``).

    Attributes:
        model: the name recorded with each result (the MLLM's, or SAM 3's for sam3-only).
        chat_model: a model the driver already built (local engine only; never pickled to
            Ray workers, which build their own from ``backends``).
        loading_bars: show the progress bars of model downloads and loading (off when the
            run shows no progress).
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
        from sam3_agent.runs.jobs.embeddings import SharedEmbeddings

        predictor: Predictor
        with nullcontext() if self.loading_bars else loading_bars_hidden():
            shared = SharedEmbeddings(self.backends.build_segmenter())
            if self.sam3_only:
                predictor = Sam3OnlyPredictor(shared, self.model, config=self.agent_config)
            else:
                chat_model = self.chat_model or self.backends.build_chat_model()
                agent = Sam3Agent(shared, chat_model, self.agent_config)
                predictor = AgentPredictor(agent, self.model)
        return EvalHandler(
            predictor, run_dir, shared, max_pixels=self.agent_config.max_image_pixels
        )
