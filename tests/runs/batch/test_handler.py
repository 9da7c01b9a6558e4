"""One request through the batch handler: any failure of its own becomes its record."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.batch.workers import BatchHandler
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import ChatModelError
from sam3_agent.values.images import RGBImage


class OneImage:
    async def get(
        self, path: Path, *, exif_orientation: bool = True, max_pixels: int | None = None
    ) -> RGBImage:
        return np.zeros((4, 4, 3), dtype=np.uint8)


class RaisingAgent:
    """Stands in for the agent: every session raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.config = AgentConfig()

    async def arun(self, image: RGBImage, query: str, *, output_dir: Path) -> None:
        raise self.error


def _run(tmp_path: Path, error: BaseException) -> RequestResult:
    handler = BatchHandler(RaisingAgent(error), tmp_path)  # type: ignore[arg-type]
    job = BatchRequest(id="a.png:cat", image_path=tmp_path / "a.png", query="cat")
    return asyncio.run(handler.run(job, OneImage()))


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (ChatModelError("endpoint down"), "ChatModelError: endpoint down"),
        # Nobody foresaw this one: still one request's failure, on one line.
        (KeyError("line\nbreak"), "KeyError: 'line\\nbreak'"),
        (RuntimeError(), "RuntimeError"),
    ],
)
def test_a_requests_own_failure_is_its_record(
    tmp_path: Path, error: BaseException, failure: str
) -> None:
    record = _run(tmp_path, error)
    assert record.status == "failed" and record.infra_error
    assert record.failure == failure


@pytest.mark.parametrize("error", [asyncio.CancelledError(), KeyboardInterrupt()])
def test_an_interrupt_stops_the_run(tmp_path: Path, error: BaseException) -> None:
    with pytest.raises(type(error)):
        _run(tmp_path, error)
