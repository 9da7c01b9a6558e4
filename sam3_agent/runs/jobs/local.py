"""The local engine: every job on one event loop in this process, ``concurrency`` at a time,
each image read once and released after its last job (each Ray worker runs it too)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import J, JobHandler, R, ResultCallback, Work
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import RGBImage, image_digest, load_image


@dataclass
class _HeldImage:
    task: asyncio.Task[tuple[RGBImage, str]]
    remaining: int


class ImageHolder:
    """Loads each image once for the ``counts`` jobs that ask for it; after the last is
    :meth:`done`, the handler is told to release the image's content digest."""

    def __init__(self, counts: dict[Path, int], handler: JobHandler[Any, Any]) -> None:
        self._counts = counts
        self._held: dict[Path, _HeldImage] = {}
        self._handler = handler

    async def get(
        self, path: Path, *, exif_orientation: bool = True, max_pixels: int | None = None
    ) -> RGBImage:
        held = self._held.get(path)
        if held is None:
            limit = {} if max_pixels is None else {"max_pixels": max_pixels}

            def load() -> tuple[RGBImage, str]:
                image = load_image(path, exif_orientation=exif_orientation, **limit)
                return image, image_digest(image)

            task = asyncio.ensure_future(asyncio.to_thread(load))
            held = self._held[path] = _HeldImage(task, self._counts.get(path, 1))
        # shield: a cancelled job must not cancel the load other jobs wait on.
        image, _ = await asyncio.shield(held.task)
        return image

    def done(self, path: Path) -> None:
        held = self._held.get(path)
        if held is None:
            return
        held.remaining -= 1
        if held.remaining > 0:
            return
        del self._held[path]
        if held.task.done() and not held.task.cancelled() and held.task.exception() is None:
            self._handler.release(held.task.result()[1])

    def cancel_all(self) -> None:
        for held in self._held.values():
            held.task.cancel()


async def run_concurrently(
    jobs: Sequence[J],
    handler: JobHandler[J, R],
    on_result: ResultCallback[R],
    *,
    concurrency: int,
    slots: asyncio.Semaphore | None = None,
) -> None:
    """Run ``jobs`` through ``handler``, ``concurrency`` at a time, in order; every running job
    holds ``slots`` too, when given."""
    holder = ImageHolder(Counter(job.image_path for job in jobs), handler)
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:
            try:
                async with slots or contextlib.nullcontext():
                    result = await handler.run(job, holder)
            finally:
                holder.done(job.image_path)
            on_result(result)

    tasks = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, max(1, len(jobs))))]
    try:
        # The first error stops all; a job that raised CancelledError stops the run as Ctrl-C
        # does, never as if all were done.
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        holder.cancel_all()


class LocalEngine:
    """All jobs in this process on one event loop; models built once by the factory."""

    name = "local"

    def __init__(self, *, concurrency: int) -> None:
        if concurrency < 1:
            raise UserError(f"`concurrency` must be >= 1, got {concurrency}")
        self.concurrency = concurrency

    async def run(self, work: Work[J, R], on_result: ResultCallback[R]) -> None:
        handler = work.factory.build(work.run_dir)
        await run_concurrently(work.jobs, handler, on_result, concurrency=self.concurrency)
