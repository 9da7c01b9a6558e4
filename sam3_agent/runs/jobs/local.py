"""The local engine: every job on one event loop in this process, ``concurrency`` at a time.

It needs nothing beyond the package and is the default. Jobs arrive ordered by image; each
image is read once, shared by its jobs, and released (with its SAM 3 features) after its
last job. :func:`run_concurrently` is also what each Ray worker runs on its share of jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.runs.jobs.base import J, JobHandler, R, ResultCallback, Work
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import RGBImage, image_digest, load_image

logger = logging.getLogger(__name__)


@dataclass
class _HeldImage:
    task: asyncio.Task[tuple[RGBImage, str]]
    remaining: int


class ImageHolder:
    """Loads each image once, shares it among its jobs, lets go after the last one.

    ``counts`` says how many jobs will ask for each path; when the last is :meth:`done`,
    the handler is told to :meth:`~JobHandler.release` the image's content digest.
    """

    def __init__(self, counts: dict[Path, int], handler: JobHandler[Any, Any]) -> None:
        self._counts = counts
        self._held: dict[Path, _HeldImage] = {}
        self._handler = handler

    async def get(
        self, path: Path, *, exif_orientation: bool = True, max_pixels: int | None = None
    ) -> RGBImage:
        held = self._held.get(path)
        if held is None:
            task = asyncio.ensure_future(
                asyncio.to_thread(_load_with_digest, path, exif_orientation, max_pixels)
            )
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
            _, digest = held.task.result()
            self._handler.release(digest)

    def cancel_all(self) -> None:
        for held in self._held.values():
            held.task.cancel()


def _load_with_digest(
    path: Path, exif_orientation: bool, max_pixels: int | None
) -> tuple[RGBImage, str]:
    limit = {} if max_pixels is None else {"max_pixels": max_pixels}
    image = load_image(path, exif_orientation=exif_orientation, **limit)
    return image, image_digest(image)


async def run_concurrently(
    jobs: Sequence[J],
    handler: JobHandler[J, R],
    on_result: ResultCallback[R],
    *,
    concurrency: int,
    slots: asyncio.Semaphore | None = None,
) -> None:
    """Run ``jobs`` through ``handler``, ``concurrency`` at a time, in the given order.

    ``slots``, when given, is held by every running job as well: a worker running several
    groups of jobs at once keeps its total within one bound.
    """
    if concurrency < 1:
        raise UserError(f"`concurrency` must be >= 1, got {concurrency}")
    counts: dict[Path, int] = {}
    for job in jobs:
        counts[job.image_path] = counts.get(job.image_path, 0) + 1
    holder = ImageHolder(counts, handler)
    queue = iter(jobs)

    async def run_one(job: J) -> None:
        try:
            if slots is None:
                result = await handler.run(job, holder)
            else:
                async with slots:
                    result = await handler.run(job, holder)
        finally:
            holder.done(job.image_path)
        on_result(result)

    async def worker() -> None:
        for job in queue:
            await run_one(job)

    try:
        await _run_workers([worker for _ in range(min(concurrency, max(1, len(jobs))))])
    finally:
        holder.cancel_all()


async def _run_workers(workers: Sequence[Callable[[], Any]]) -> None:
    """Run the workers; the first error (or a cancellation) stops all and propagates."""
    tasks = [asyncio.ensure_future(w()) for w in workers]
    try:
        finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in finished:
            if task.cancelled():
                # A job raised CancelledError: stop as on Ctrl-C, never as if all were done.
                raise asyncio.CancelledError
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
