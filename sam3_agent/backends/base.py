"""The interfaces the agent depends on: a chat model, and SAM 3 on images or on video.

A :class:`Segmenter` follows segment-anything's predictor: the expensive image embedding is
computed once (:meth:`Segmenter.embed`) and answers many phrase queries. ``embed`` returns a
handle instead of storing the image on the segmenter, so one segmenter can serve many
concurrent sessions (batch evaluation) without a shared "current image".

The Protocols name what every backend must offer. What a backend may offer besides is
declared too, each capability as a small Protocol read by one function that applies its
documented default to a backend without it:

* :class:`ReadsPhrases` (an embedding: how it read a phrase; SAM 3 cuts a long one to its
  text encoder's limit), :func:`phrase_as_read`: read in full;
* :class:`ChecksReady` (a segmenter: a remote service's health and token), :func:`preflight`:
  ready; the agent asks before its first model call;
* :class:`DescribesItself` (any backend: which model, which settings shape its answers),
  :func:`describe_backend`: undescribed; a resumed session must be answered by backends
  that describe themselves the same;
* :class:`HasGenerationParams` (a chat model: what besides the messages shapes a reply, part
  of every replay key), :func:`generation_params`: none;
* :class:`HasTokenizer` (a chat model in process: its tokenizer, to count a context
  exactly), :func:`tokenizer_of`: none;
* :class:`Closes` (a chat model holding connections), :func:`close_backend`: nothing to close.

A backend that wraps another (a cache, the resume journal, a shared embedding) derives from
:class:`ChatModelWrapper`, :class:`SegmenterWrapper` or :class:`EmbeddingWrapper`, which
forward every one of these, so a new wrapper cannot switch a capability off.

A :class:`VideoSegmenter` is the same idea on video: :meth:`VideoSegmenter.open` returns a
:class:`VideoEmbedding` whose :meth:`~VideoEmbedding.track` follows each phrase's instances
through the clip and returns mask tracks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from sam3_agent.media.video import VideoSource
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from sam3_agent.values.tracks import Tracks


@runtime_checkable
class ImageEmbedding(Protocol):
    """One image whose features are computed; segment any number of phrases against it."""

    @property
    def image_size(self) -> tuple[int, int]:
        """``(height, width)`` of the image in pixels."""
        ...

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        """Segment each phrase; one :class:`Detections` per phrase, in order.

        Masks are at the image's full resolution, boxes XYXY in pixels. Detections scoring
        below ``score_threshold`` may be dropped by the backend; the agent's post-processing
        (:func:`sam3_agent.values.masks.postprocess`) applies the threshold again regardless.

        Raises:
            SegmenterError: the backend failed (OOM, service unreachable).
        """
        ...


@runtime_checkable
class ReadsPhrases(Protocol):
    """Optional on an :class:`ImageEmbedding`: how it read each phrase it segmented.

    An embedding without this method is taken to read every phrase in full.
    """

    def used_phrase(self, phrase: str) -> str:
        """``phrase`` as the segmenter read it in ``segment``: the same string, or its
        longest prefix that fits the text encoder's limit (SAM 3 reads 32 tokens).

        Raises:
            SegmenterError: the backend failed.
        """
        ...


def phrase_as_read(embedding: ImageEmbedding | VideoEmbedding, phrase: str) -> str:
    """``phrase`` as ``embedding`` (an image's or a video's) read it: its
    :meth:`ReadsPhrases.used_phrase` when it has one, else ``phrase`` itself (the documented
    default)."""
    return str(embedding.used_phrase(phrase)) if isinstance(embedding, ReadsPhrases) else phrase


@runtime_checkable
class Segmenter(Protocol):
    """SAM 3 (or a stand-in) as the agent sees it."""

    def embed(self, image: RGBImage) -> ImageEmbedding:
        """Compute (or fetch from a cache) the features of an ``(H, W, 3)`` uint8 RGB image."""
        ...


@runtime_checkable
class VideoEmbedding(Protocol):
    """One video opened for tracking; track any number of phrases through it.

    The video counterpart of :class:`ImageEmbedding`. Frames are streamed from the
    :class:`~sam3_agent.media.video.VideoSource` on each call, so memory stays flat in the
    clip's length; a backend may keep per-frame features in a cache bounded in bytes.
    """

    @property
    def video(self) -> VideoSource:
        """The video, with the frames tracked (:attr:`VideoSource.indices`)."""
        ...

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        """Track every instance of each phrase through the video; one :class:`Tracks` per
        phrase, in order.

        Masks are at the video's full resolution, keyed by frame position. Tracks scoring
        below ``score_threshold`` may be dropped; the agent's post-processing
        (:func:`sam3_agent.values.tracks.postprocess_tracks`) applies it again regardless.

        Raises:
            SegmenterError: the backend failed. VideoLoadError: a frame became unreadable.
        """
        ...


@runtime_checkable
class VideoSegmenter(Protocol):
    """SAM 3's video model (or a stand-in) as the video agent sees it."""

    def open(self, video: VideoSource) -> VideoEmbedding:
        """Prepare ``video`` for tracking (no frame need be decoded yet)."""
        ...


@runtime_checkable
class ChecksReady(Protocol):
    """Optional on a :class:`Segmenter`: a cheap check that it can answer, made before any
    paid work (the agent calls it before its first chat-model request).

    A segmenter without this method is taken to be ready.
    """

    def check(self) -> None:
        """Return when the segmenter can answer (may remember a success).

        Raises:
            SegmenterError: it cannot (a service unreachable, or refusing the token).
        """
        ...


def preflight(segmenter: object) -> None:
    """``segmenter``'s (an image's or a video's) :meth:`ChecksReady.check` when it has one;
    nothing otherwise.

    Raises:
        SegmenterError: the check failed.
    """
    if isinstance(segmenter, ChecksReady):
        segmenter.check()


@runtime_checkable
class ChatModel(Protocol):
    """A multimodal chat model. Implementations must be safe to call concurrently."""

    @property
    def name(self) -> str:
        """The model's name as recorded in results and cache keys."""
        ...

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        """Answer one conversation.

        ``tools`` is given only with native tool calling; the reply's structured calls then
        arrive in :attr:`ChatResponse.tool_calls`.

        Raises:
            ChatModelError: the backend failed after its own retries.
        """
        ...


@runtime_checkable
class DescribesItself(Protocol):
    """Optional on a :class:`ChatModel` or a :class:`Segmenter`: what shapes its answers
    besides the request (its model, dtype, generation settings).

    A backend without this method is described by its :attr:`ChatModel.name` alone.
    """

    def describe(self) -> Mapping[str, Any] | None:
        """The options that shape this backend's answers, by their user-facing names (the
        CLI flags), with JSON-ready values; ``None`` for an option not set. See
        :mod:`sam3_agent.backends.identity`."""
        ...


def describe_backend(backend: object) -> dict[str, Any] | None:
    """``backend``'s :meth:`DescribesItself.describe` when it has one, else ``None``."""
    description = backend.describe() if isinstance(backend, DescribesItself) else None
    return dict(description) if isinstance(description, Mapping) else None


@runtime_checkable
class HasGenerationParams(Protocol):
    """Optional on a :class:`ChatModel`: everything besides the messages that shapes a reply
    (token limit, temperature, sampling), part of every replay key
    (:func:`~sam3_agent.values.messages.request_key`)."""

    @property
    def generation_params(self) -> Mapping[str, Any] | None: ...


def generation_params(model: object) -> dict[str, Any]:
    """``model``'s :attr:`HasGenerationParams.generation_params`; ``{}`` without them."""
    params = model.generation_params if isinstance(model, HasGenerationParams) else None
    return dict(params or {})


@runtime_checkable
class HasTokenizer(Protocol):
    """Optional on a :class:`ChatModel` run in process: its own tokenizer (a transformers
    tokenizer), with which a context's tokens are counted exactly."""

    @property
    def tokenizer(self) -> Any: ...


def tokenizer_of(model: object) -> Any:
    """``model``'s :attr:`HasTokenizer.tokenizer`; None without one."""
    return model.tokenizer if isinstance(model, HasTokenizer) else None


@runtime_checkable
class Closes(Protocol):
    """Optional on a :class:`ChatModel`: release its connections (an HTTP client's)."""

    async def aclose(self) -> None: ...


async def close_backend(model: object) -> None:
    """``model``'s :meth:`Closes.aclose` when it has one; nothing otherwise."""
    if isinstance(model, Closes):
        await model.aclose()


class ChatModelWrapper:
    """The base of a :class:`ChatModel` that wraps ``inner``: it answers under the inner
    model's name and forwards every optional capability above; a subclass writes
    ``complete``."""

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
    """The base of a segmenter (an image's or a video's) that wraps ``inner``: it forwards
    :meth:`ChecksReady.check` and :meth:`DescribesItself.describe`; a subclass writes
    ``embed`` or ``open``."""

    def __init__(self, inner: S) -> None:
        self.inner: S = inner

    def check(self) -> None:
        preflight(self.inner)

    def describe(self) -> dict[str, Any] | None:
        return describe_backend(self.inner)


class EmbeddingWrapper:
    """The base of an :class:`ImageEmbedding` that wraps ``inner``: it forwards
    ``image_size`` and :meth:`ReadsPhrases.used_phrase`; a subclass writes ``segment``."""

    def __init__(self, inner: ImageEmbedding) -> None:
        self.inner = inner

    @property
    def image_size(self) -> tuple[int, int]:
        return self.inner.image_size

    def used_phrase(self, phrase: str) -> str:
        return phrase_as_read(self.inner, phrase)
