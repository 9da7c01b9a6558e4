"""The interfaces the agent depends on: a chat model, and SAM 3 on images or video. Each
optional capability is a small Protocol read by one function that applies its default; the
``*Wrapper`` bases forward every one, so a new wrapper cannot switch one off."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from sam3_agent.media.video import VideoSource
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from sam3_agent.values.tracks import Tracks


@runtime_checkable
class ImageEmbedding(Protocol):
    """One image whose features are computed; segment any number of phrases against it."""

    @property
    def image_size(self) -> tuple[int, int]: ...  # (height, width) in pixels

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        """One :class:`Detections` per phrase, in order; masks at full resolution, boxes XYXY
        in pixels; some below ``score_threshold`` may be dropped. ``exemplars`` (boxes on this
        image) go with every phrase. Raises SegmenterError."""
        ...


@runtime_checkable
class ReadsPhrases(Protocol):
    """Optional on an embedding: how it read each phrase (default: in full)."""

    def used_phrase(self, phrase: str) -> str:
        """``phrase``, or its longest prefix that fits the text encoder (SAM 3: 32 tokens)."""
        ...


def phrase_as_read(embedding: ImageEmbedding | VideoEmbedding, phrase: str) -> str:
    """``phrase`` as ``embedding`` (an image's or a video's) read it."""
    return str(embedding.used_phrase(phrase)) if isinstance(embedding, ReadsPhrases) else phrase


@runtime_checkable
class Segmenter(Protocol):
    """SAM 3 (or a stand-in) as the agent sees it; one serves many concurrent sessions."""

    def embed(self, image: RGBImage) -> ImageEmbedding: ...  # (H, W, 3) uint8 RGB


@runtime_checkable
class VideoEmbedding(Protocol):
    """One video opened for tracking; frames are streamed on each call (memory flat in the
    clip's length)."""

    @property
    def video(self) -> VideoSource: ...  # with the frames tracked (its ``indices``)

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        """One :class:`Tracks` per phrase, in order, keyed by frame position; some below
        ``score_threshold`` may be dropped. Raises SegmenterError or VideoLoadError."""
        ...


@runtime_checkable
class VideoSegmenter(Protocol):
    """SAM 3's video model (or a stand-in) as the video agent sees it."""

    def open(self, video: VideoSource) -> VideoEmbedding: ...  # no frame need be decoded yet


@runtime_checkable
class ChecksReady(Protocol):
    """Optional on a segmenter: a cheap readiness check made before the first chat request
    (default: ready); raises SegmenterError when it cannot answer."""

    def check(self) -> None: ...


def preflight(segmenter: object) -> None:
    if isinstance(segmenter, ChecksReady):
        segmenter.check()


@runtime_checkable
class ChatModel(Protocol):
    """A multimodal chat model. Implementations must be safe to call concurrently."""

    @property
    def name(self) -> str: ...  # as recorded in results and cache keys

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        """``tools`` only with native tool calling. Raises ChatModelError after the backend's
        own retries."""
        ...


@runtime_checkable
class DescribesItself(Protocol):
    """Optional on any backend: what shapes its answers besides the request, by user-facing
    option name (default: its name alone); a resumed session needs backends described alike."""

    def describe(self) -> Mapping[str, Any] | None: ...


def describe_backend(backend: object) -> dict[str, Any] | None:
    description = backend.describe() if isinstance(backend, DescribesItself) else None
    return dict(description) if isinstance(description, Mapping) else None


@runtime_checkable
class HasGenerationParams(Protocol):
    """Optional on a chat model: what besides the messages shapes a reply (in replay keys)."""

    @property
    def generation_params(self) -> Mapping[str, Any] | None: ...


def generation_params(model: object) -> dict[str, Any]:
    params = model.generation_params if isinstance(model, HasGenerationParams) else None
    return dict(params or {})


@runtime_checkable
class HasTokenizer(Protocol):
    """Optional on an in-process chat model: its tokenizer, to count a context exactly."""

    @property
    def tokenizer(self) -> Any: ...


def tokenizer_of(model: object) -> Any:
    return model.tokenizer if isinstance(model, HasTokenizer) else None


@runtime_checkable
class Closes(Protocol):
    """Optional on a chat model: release its connections."""

    async def aclose(self) -> None: ...


async def close_backend(model: object) -> None:
    if isinstance(model, Closes):
        await model.aclose()


class ChatModelWrapper:
    """Base of a chat model wrapping ``inner``: its name and every capability forwarded; a
    subclass writes ``complete``."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def generation_params(self) -> dict[str, Any]:
        return generation_params(self.inner)

    @property
    def tokenizer(self) -> Any:
        return tokenizer_of(self.inner)

    def describe(self) -> dict[str, Any] | None:
        return describe_backend(self.inner)

    async def aclose(self) -> None:
        await close_backend(self.inner)


S = TypeVar("S", Segmenter, VideoSegmenter)


class SegmenterWrapper(Generic[S]):
    """Base of a segmenter wrapping ``inner``; a subclass writes ``embed`` or ``open``."""

    def __init__(self, inner: S) -> None:
        self.inner: S = inner

    def check(self) -> None:
        preflight(self.inner)

    def describe(self) -> dict[str, Any] | None:
        return describe_backend(self.inner)


class EmbeddingWrapper:
    """Base of an embedding wrapping ``inner``; a subclass writes ``segment``."""

    def __init__(self, inner: ImageEmbedding) -> None:
        self.inner = inner

    @property
    def image_size(self) -> tuple[int, int]:
        return self.inner.image_size

    def used_phrase(self, phrase: str) -> str:
        return phrase_as_read(self.inner, phrase)
