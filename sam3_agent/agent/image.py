"""What a kind of input supplies to the one agent loop (:class:`Medium`), and the image medium:
what a session on one photo asks SAM 3, shows the model and its checkers (each check image
sized for its mask: checks carry most tokens), and writes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sam3_agent.agent import rundir, tools
from sam3_agent.agent.checkpoint import Checkpoint, Fingerprint
from sam3_agent.agent.checkpoint.state import Backends
from sam3_agent.agent.checks import CheckRequest, CheckView
from sam3_agent.agent.ended import image_result
from sam3_agent.agent.prompts import PromptKind
from sam3_agent.agent.result import AgentResult, SessionResult
from sam3_agent.agent.rundir import ExportFormat
from sam3_agent.agent.session import Scene, Session
from sam3_agent.agent.steps import Final
from sam3_agent.agent.tools import Registry
from sam3_agent.backends.base import ImageEmbedding, Segmenter, phrase_as_read
from sam3_agent.media.render import Renderer
from sam3_agent.values.config import AgentConfig, ToolSet
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.images import EncodedImage, ImageInput, RGBImage, load_image
from sam3_agent.values.masks import postprocess

In_contra = TypeVar("In_contra", contravariant=True)
S = TypeVar("S", bound="Scene[Any]")
R = TypeVar("R", bound=SessionResult)


class Medium(Protocol[In_contra, S, R]):
    """What a kind of input supplies: its templates, tools, and per request a scene,
    fingerprint, result and files."""

    kind: PromptKind
    tool_sets: Mapping[ToolSet, Registry]

    @property
    def segmenter(self) -> object: ...

    def open(
        self,
        source: In_contra,
        config: AgentConfig,
        *,
        image_path: str | Path | None,
        exports: Iterable[ExportFormat],
    ) -> S:
        """Read ``source`` (raising the medium's load error) into a scene."""
        ...

    def fingerprint(
        self, scene: S, query: str, config: AgentConfig, model: str, backends: Backends
    ) -> Fingerprint: ...

    def attach(self, scene: S, checkpoint: Checkpoint) -> None:
        """Give ``scene`` the segmenter, journaled by ``checkpoint``."""
        ...

    def result(self, scene: S, fields: dict[str, Any], final: Final[Any] | None) -> R: ...

    def write(self, out: Path, result: R, scene: S) -> None:
        """Write the run directory's outputs of ``result``, ``result.json`` last."""
        ...


RENDER_WORKERS = min(4, os.cpu_count() or 1)  # OpenCV releases the GIL


class ContextImages:
    """The plain image encoded once per context size, shared by checks; thread-safe."""

    def __init__(
        self, renderer: Renderer, quality: int, display: EncodedImage | None = None
    ) -> None:
        self._renderer = renderer
        self._quality = quality
        self._encoded: dict[int, EncodedImage] = {}
        if display is not None:
            self._encoded[max(renderer.display_image.shape[:2])] = display
        self._lock = threading.Lock()

    def get(self, side: int) -> EncodedImage:
        with self._lock:
            cached = self._encoded.get(side)
        if cached is None:
            cached = EncodedImage.encode(
                self._renderer.context(side), f"input_{side}", quality=self._quality
            )
            with self._lock:
                cached = self._encoded.setdefault(side, cached)
        return cached


def check_requests(
    renderer: Renderer,
    detections: Detections,
    *,
    prefix: str,
    quality: int,
    contexts: ContextImages | None = None,
    workers: int = RENDER_WORKERS,
) -> list[CheckRequest]:
    """Each mask's check (1-based, in order): the plain image and the mask drawn, both at
    its context size, and its close-up, rendered on ``workers`` threads."""
    total = len(detections)
    plain = contexts or ContextImages(renderer, quality)

    def one(i: int) -> CheckRequest:
        name = f"{prefix}_check{i + 1:02d}"
        side = renderer.context_side(detections, i)
        mask = EncodedImage.encode(renderer.single(detections, i, side), name, quality=quality)
        zoom = EncodedImage.encode(renderer.zoom(detections, i), f"{name}_zoom", quality=quality)
        return CheckRequest(i + 1, total, (plain.get(side), mask, zoom), mask, zoom)

    if workers <= 1 or total <= 1:
        return [one(i) for i in range(total)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, range(total)))


class ImageScene(Scene[Detections]):
    """One photo: its pixels, its renders, and SAM 3's features of it."""

    answer_type = Detections

    def __init__(
        self,
        image: RGBImage,
        config: AgentConfig,
        *,
        path: str | None = None,
        exports: Iterable[ExportFormat] = (),
    ) -> None:
        self.image = image
        self.config = config
        self.path = path
        self.exports = frozenset(exports)
        self.segmenter: Segmenter | None = None
        self.renderer = Renderer(image, config.max_image_side)
        self.task_image = EncodedImage.encode(
            self.renderer.display_image, "input", quality=config.jpeg_quality
        )
        self._contexts = ContextImages(self.renderer, config.jpeg_quality, self.task_image)
        self._embedding: asyncio.Future[ImageEmbedding] | None = None

    @property
    def mask_size(self) -> tuple[int, int]:
        h, w = self.image.shape[:2]
        return int(h), int(w)

    def start(self, session: Session[Detections]) -> None:
        self._features(session)

    def _features(self, session: Session[Detections]) -> asyncio.Future[ImageEmbedding]:
        if self._embedding is None:
            segmenter = self.segmenter
            if segmenter is None:
                raise RuntimeError("the scene has no segmenter: ImageMedium.attach one first")

            def embed() -> ImageEmbedding:
                started = time.perf_counter()
                embedding = segmenter.embed(self.image)
                session.timings["embed"] += time.perf_counter() - started
                return embedding

            self._embedding = asyncio.ensure_future(asyncio.to_thread(embed))
        return self._embedding

    async def close(self) -> None:
        if self._embedding is not None and not self._embedding.cancelled():
            with contextlib.suppress(Exception):
                await self._embedding

    def empty(self) -> Detections:
        return Detections.empty(*self.mask_size)

    async def segment(
        self, session: Session[Detections], phrase: str, exemplars: Exemplars | None = None
    ) -> tuple[Detections, str]:
        with session.timed("embed_wait"):
            embedding = await self._features(session)
        threshold = self.config.score_threshold

        def run() -> tuple[Detections, str]:
            if exemplars:
                found = embedding.segment([phrase], threshold, exemplars)[0]
            else:
                found = embedding.segment([phrase], threshold)[0]
            return found, phrase_as_read(embedding, phrase)

        with session.timed("segment"):
            raw, used = await asyncio.to_thread(run)
            detections = await asyncio.to_thread(
                postprocess,
                raw,
                score_threshold=threshold,
                overlap_threshold=self.config.overlap_threshold,
            )
        return detections, used

    def numbered(self, candidates: Detections, kept: Detections | None = None) -> RGBImage:
        return self.renderer.numbered(candidates, kept)

    async def check_views(
        self, session: Session[Detections], candidates: Detections
    ) -> Sequence[CheckView]:
        return await asyncio.to_thread(
            check_requests,
            self.renderer,
            candidates,
            prefix=f"r{session.round:03d}",
            quality=self.config.jpeg_quality,
            contexts=self._contexts,
        )


class ImageMedium:
    kind: PromptKind = "image"
    tool_sets: Mapping[ToolSet, Registry] = {"paper": tools.TOOLS, "extended": tools.EXTENDED_TOOLS}

    def __init__(self, segmenter: Segmenter) -> None:
        self.segmenter = segmenter

    def open(
        self,
        source: ImageInput,
        config: AgentConfig,
        *,
        image_path: str | Path | None,
        exports: Iterable[ExportFormat],
    ) -> ImageScene:
        if image_path is None and isinstance(source, (str, Path)):
            image_path = source
        pixels = load_image(source, max_pixels=config.max_image_pixels)
        path = str(image_path) if image_path is not None else None
        return ImageScene(pixels, config, path=path, exports=exports)

    def fingerprint(
        self, scene: ImageScene, query: str, config: AgentConfig, model: str, backends: Backends
    ) -> Fingerprint:
        return Fingerprint.of(
            query=query, image=scene.image, config=config, model=model, backends=backends
        )

    def attach(self, scene: ImageScene, checkpoint: Checkpoint) -> None:
        scene.segmenter = checkpoint.segmenter(self.segmenter)

    def result(
        self, scene: ImageScene, fields: dict[str, Any], final: Final[Detections] | None
    ) -> AgentResult:
        return image_result(fields, final, scene.mask_size, scene.path)

    def write(self, out: Path, result: AgentResult, scene: ImageScene) -> None:
        rundir.write_run(out, result, scene.image, scene.exports)
