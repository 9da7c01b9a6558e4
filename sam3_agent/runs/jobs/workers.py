"""What each engine worker builds (picklable, for Ray actors).

A factory carries a :class:`~sam3_agent.backends.spec.BackendSpec` and an ``AgentConfig``,
never models: :meth:`build` loads the models where the work runs
(this process for the local engine, each actor for Ray). The agent and the runner are
imported there too, so the commands can name the factories without importing numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.batch.handler import BatchHandler
    from sam3_agent.runs.evaluation.runner import EvalHandler


@dataclass(frozen=True)
class BatchWorkerFactory:
    """One agent per worker: SAM 3 (or its service client) and the MLLM client.

    Attributes:
        chat_model: a model the driver already built (local engine only; never pickled to
            Ray workers, which build their own from ``backends``).
    """

    backends: BackendSpec
    agent_config: AgentConfig
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)

    def build(self, run_dir: Path) -> BatchHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.batch.handler import BatchHandler
        from sam3_agent.runs.evaluation.runner import SharedEmbeddings

        shared = SharedEmbeddings(self.backends.build_segmenter())
        chat_model = self.chat_model or self.backends.build_chat_model()
        return BatchHandler(Sam3Agent(shared, chat_model, self.agent_config), run_dir, shared)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["chat_model"] = None  # a driver-side model stays on the driver
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)


@dataclass(frozen=True)
class EvalWorkerFactory:
    """The evaluation predictor per worker: the agent, or SAM 3 alone (``sam3_only``).

    Attributes:
        model: the name recorded with each result (the MLLM's, or SAM 3's for sam3-only).
    """

    backends: BackendSpec
    agent_config: AgentConfig
    sam3_only: bool
    model: str
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)

    def build(self, run_dir: Path) -> EvalHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.evaluation.runner import (
            AgentPredictor,
            EvalHandler,
            Predictor,
            Sam3OnlyPredictor,
            SharedEmbeddings,
        )

        shared = SharedEmbeddings(self.backends.build_segmenter())
        predictor: Predictor
        if self.sam3_only:
            predictor = Sam3OnlyPredictor(
                shared, self.model, score_threshold=self.agent_config.score_threshold
            )
        else:
            chat_model = self.chat_model or self.backends.build_chat_model()
            predictor = AgentPredictor(Sam3Agent(shared, chat_model, self.agent_config), self.model)
        return EvalHandler(predictor, run_dir, shared)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["chat_model"] = None  # a driver-side model stays on the driver
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)
