"""A segmenter wrapper that embeds each image once while a worker's jobs hold it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sam3_agent.backends.base import ImageEmbedding, Segmenter, preflight
from sam3_agent.values.images import RGBImage, image_digest


@dataclass
class _EmbeddingEntry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    embedding: ImageEmbedding | None = None


class SharedEmbeddings:
    """A :class:`Segmenter` embedding each image once, keyed by its content digest; concurrent
    requests for one image wait for the first instead of running the backbone twice."""

    def __init__(self, inner: Segmenter) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._entries: dict[str, _EmbeddingEntry] = {}

    def embed(self, image: RGBImage) -> ImageEmbedding:
        key = image_digest(image)
        with self._lock:
            entry = self._entries.setdefault(key, _EmbeddingEntry())
        with entry.lock:
            if entry.embedding is None:
                entry.embedding = self.inner.embed(image)
            return entry.embedding

    def check(self) -> None:
        """The inner segmenter's readiness check (:func:`~sam3_agent.backends.base.preflight`)."""
        preflight(self.inner)

    def release(self, digest: str) -> None:
        """Forget the embedding of the image with this content digest."""
        with self._lock:
            self._entries.pop(digest, None)

    @property
    def held(self) -> int:
        """Images whose embedding is held now."""
        with self._lock:
            return len(self._entries)
