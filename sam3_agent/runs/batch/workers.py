"""What each engine worker of a batch builds (picklable, for Ray actors).

The factory carries settings, never models: :meth:`BatchWorkerFactory.build` loads the models
where the work runs (this process for the local engine, each actor for Ray). The agent is
imported there too, so naming the factory imports no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.runs.jobs.models import LeavesChatModelOnDriver, ModelSource
from sam3_agent.values.config import AgentConfig

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel
    from sam3_agent.runs.batch.handler import BatchHandler


@dataclass(frozen=True)
class BatchWorkerFactory(LeavesChatModelOnDriver):
    """One agent per worker: SAM 3 (or its service client) and the MLLM client (see
    :class:`~sam3_agent.runs.jobs.models.LeavesChatModelOnDriver` for the fields)."""

    backends: ModelSource
    agent_config: AgentConfig
    chat_model: ChatModel | None = field(default=None, compare=False, repr=False)
    loading_bars: bool = True

    def build(self, run_dir: Path) -> BatchHandler:
        from sam3_agent.agent.loop import Sam3Agent
        from sam3_agent.runs.batch.handler import BatchHandler

        with self.loading():
            shared = self.shared_segmenter()
            agent = Sam3Agent(shared, self.worker_chat_model(), self.agent_config)
        return BatchHandler(agent, run_dir, shared)
