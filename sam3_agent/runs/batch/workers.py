"""What each engine worker of a batch builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`BatchWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent is
imported there too, so naming the factory imports no numpy.
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
    from sam3_agent.runs.batch.handler import BatchHandler


@dataclass(frozen=True)
class BatchWorkerFactory(LeavesChatModelOnDriver):
    """One agent per worker: SAM 3 (or its service client) and the MLLM client.

    Attributes:
        chat_model: a model the driver already built (local engine only; never pickled to
            Ray workers, which build their own from ``backends``).
        loading_bars: show the progress bars of model downloads and loading (off when the
            run shows no progress).
    """

    backends: ModelSource
    agent_config: AgentConfig
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True

    def build(self, run_dir: Path) -> BatchHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.batch.handler import BatchHandler
        from sam3_agent.runs.jobs.embeddings import SharedEmbeddings

        with nullcontext() if self.loading_bars else loading_bars_hidden():
            shared = SharedEmbeddings(self.backends.build_segmenter())
            chat_model = self.chat_model or self.backends.build_chat_model()
        return BatchHandler(Sam3Agent(shared, chat_model, self.agent_config), run_dir, shared)
