"""Worker factories for the engine tests; importable by Ray workers (the repository root is on their path).

:class:`KillOnceFactory` wraps a real factory: the first worker to meet ``victim`` kills
its own process (SIGKILL, no cleanup), once per ``marker`` file, as a lost machine would.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import ImageSource, JobHandler, JobResult, WorkerFactory


@dataclass
class KillOnceHandler:
    inner: JobHandler[Any, Any]
    victim: str
    marker: Path

    async def run(self, job: Any, images: ImageSource) -> JobResult:
        if job.id == self.victim:
            try:
                self.marker.touch(exist_ok=False)
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return await self.inner.run(job, images)

    def release(self, digest: str) -> None:
        self.inner.release(digest)


@dataclass(frozen=True)
class KillOnceFactory:
    inner: WorkerFactory[Any, Any]
    victim: str
    marker: str

    def build(self, run_dir: Path) -> KillOnceHandler:
        return KillOnceHandler(self.inner.build(run_dir), self.victim, Path(self.marker))
