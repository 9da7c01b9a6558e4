"""The SAM 3 service's wire format, shared by the server and :class:`RemoteSegmenter`.

Sizes are ``[height, width]`` in pixels, boxes ``[x1, y1, x2, y2]`` in pixels of the
original image, masks COCO RLE (``{"size": [H, W], "counts": str}``). Every error response
is ``{"error": str, "code": str}`` plus ``details`` for validation errors.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sam3_agent.backends.segment_args import phrase_problem

RleOrder = Literal["coco", "rows"]
"""``coco``: standard COCO RLE of each ``(H, W)`` mask (``size`` ``[H, W]``, runs down the
columns). ``rows``: COCO RLE of each mask's transpose (``size`` ``[W, H]``, runs along the
rows): see :mod:`sam3_agent.backends.wire`."""

RAW_RGB_MIME = "application/x-sam3-rgb8"
"""Content type of an upload holding ``H * W * 3`` bytes of RGB, rows top to bottom;
``height`` and ``width`` go in the query string."""

MAX_PHRASES = 32
"""Phrases one segment request may carry."""

IMAGE_ID_PATTERN = r"^[0-9a-f]{64}$"
"""An image id is the SHA-256 content hash of the decoded pixels (``image_digest``)."""


class ErrorCode:
    """Machine-readable ``code`` values of error responses."""

    UNKNOWN_IMAGE = "unknown_image"
    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    BAD_IMAGE = "bad_image"
    BAD_JSON = "bad_json"
    INVALID = "invalid_request"
    SEGMENTER = "segmenter_failed"
    NOT_FOUND = "not_found"
    INTERNAL = "internal_error"
    BUSY = "busy"
    """503: every slot of the request's kind is held and the waiting line is full; the
    answer carries ``Retry-After``."""


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class UploadResponse(BaseModel):
    """Answer to ``POST /v1/images``."""

    image_id: str = Field(pattern=IMAGE_ID_PATTERN)
    image_size: tuple[int, int]
    """``[height, width]``."""


class SegmentRequest(BaseModel):
    """Body of ``POST /v1/segment``: exactly one of ``image_id`` and ``image_base64``."""

    model_config = ConfigDict(extra="forbid")

    image_id: str | None = Field(default=None, pattern=IMAGE_ID_PATTERN)
    """Id returned by ``POST /v1/images``."""
    image_base64: str | None = None
    """An encoded image file (PNG, JPEG, ...) as base64, instead of an id."""
    phrases: list[str] = Field(min_length=1, max_length=MAX_PHRASES)
    """Noun phrases; one result per phrase, in order. Accepted and cleaned by the rule of
    every backend (:func:`~sam3_agent.backends.segment_args.phrase_problem`,
    :func:`~sam3_agent.backends.segment_args.clean_phrase`)."""
    score_threshold: float = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    """Detections scoring at or below this are dropped."""
    rle_order: RleOrder = "coco"
    """How masks are encoded (:data:`sam3_agent.backends.wire.RleOrder`)."""

    @field_validator("phrases")
    @classmethod
    def _phrases_are_text(cls, phrases: list[str]) -> list[str]:
        # The in-process backend's rule, so both paths accept the same phrases.
        for phrase in phrases:
            problem = phrase_problem(phrase)
            if problem is not None:
                raise ValueError(problem)
        return phrases

    @model_validator(mode="after")
    def _one_image(self) -> SegmentRequest:
        if (self.image_id is None) == (self.image_base64 is None):
            raise ValueError("give exactly one of image_id and image_base64")
        return self


class RleMask(BaseModel):
    """COCO RLE; ``size`` is ``[H, W]``, or ``[W, H]`` with ``rle_order="rows"``."""

    size: tuple[int, int]
    counts: str


class PhraseResult(BaseModel):
    phrase: str
    """The request's phrase as cleaned (:func:`~sam3_agent.backends.segment_args.clean_phrase`)."""
    used_phrase: str | None = None
    """The phrase as SAM 3 read it (cut to its text encoder's limit); None: not reported."""
    masks: list[RleMask]
    boxes: list[tuple[float, float, float, float]]
    scores: list[float]


class SegmentResponse(BaseModel):
    """Answer to ``POST /v1/segment``."""

    image_id: str
    image_size: tuple[int, int]
    """``[height, width]``."""
    results: list[PhraseResult]
