"""The SAM 3 service's wire format, shared by the server and its clients. Sizes are
``[height, width]``, boxes ``[x1, y1, x2, y2]`` in pixels, masks COCO RLE; every error is
``{"error": str, "code": str}`` plus ``details`` for validation errors."""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from sam3_agent.backends.segment_args import phrase_problem

RleOrder = Literal["coco", "rows"]
"""``coco``: COCO RLE of each ``(H, W)`` mask; ``rows``: of each mask's transpose (``size``
``[W, H]``): see :mod:`sam3_agent.backends.wire`."""

RAW_RGB_MIME = "application/x-sam3-rgb8"  # H * W * 3 bytes, rows top down; size in the query
MAX_PHRASES = 32  # per segment request
MAX_EXEMPLARS = 32  # boxes per segment request
IMAGE_ID_PATTERN = r"^[0-9a-f]{64}$"  # SHA-256 of the decoded pixels (``image_digest``)
VIDEO_ID_PATTERN = r"^[0-9a-f]{64}$"  # SHA-256 of the uploaded body (file or tar)
TAR_MIME = "application/x-tar"
"""A video as its frames: an uncompressed tar of ``.jpg``/``.jpeg``/``.png`` files at its top
level, in name order; any other body is read as a video file."""


def check_phrases(phrases: list[str]) -> list[str]:
    """The in-process backend's rule (ValueError for the first phrase refused)."""
    for phrase in phrases:
        problem = phrase_problem(phrase)
        if problem is not None:
            raise ValueError(problem)
    return phrases


Phrases = Annotated[
    list[str], Field(min_length=1, max_length=MAX_PHRASES), AfterValidator(check_phrases)
]
"""One result per phrase, in order; accepted and cleaned as every backend does."""
Threshold = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class ErrorCode:
    """Machine-readable ``code`` values of error responses."""

    UNKNOWN_IMAGE = "unknown_image"
    UNKNOWN_VIDEO = "unknown_video"  # 404: never uploaded, or evicted: upload it again
    NO_VIDEO = "video_off"  # 404: the service was started without ``--video``
    BAD_VIDEO = "bad_video"
    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    BAD_IMAGE = "bad_image"
    BAD_JSON = "bad_json"
    INVALID = "invalid_request"
    SEGMENTER = "segmenter_failed"
    NOT_FOUND = "not_found"
    INTERNAL = "internal_error"
    BUSY = "busy"  # 503 with Retry-After: every slot held and the waiting line full


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class UploadResponse(BaseModel):
    """Answer to ``POST /v1/images``."""

    image_id: str = Field(pattern=IMAGE_ID_PATTERN)
    image_size: tuple[int, int]


class ExemplarBoxes(BaseModel):
    """Boxes SAM 3 takes with every phrase: XYXY pixels of the image, ``positive`` per box."""

    model_config = ConfigDict(extra="forbid")

    boxes: list[tuple[int, int, int, int]] = Field(max_length=MAX_EXEMPLARS)
    positive: list[bool] = Field(max_length=MAX_EXEMPLARS)

    @model_validator(mode="after")
    def _one_label_per_box(self) -> ExemplarBoxes:
        if len(self.boxes) != len(self.positive):
            raise ValueError(
                f"give one label per box, got {len(self.boxes)} boxes and "
                f"{len(self.positive)} labels"
            )
        return self


class SegmentRequest(BaseModel):
    """Body of ``POST /v1/segment``: exactly one of ``image_id`` and ``image_base64``."""

    model_config = ConfigDict(extra="forbid")

    image_id: str | None = Field(default=None, pattern=IMAGE_ID_PATTERN)
    image_base64: str | None = None  # an image file (PNG, JPEG, ...) instead of an id
    phrases: Phrases
    score_threshold: Threshold = 0.5  # detections scoring at or below it are dropped
    rle_order: RleOrder = "coco"
    exemplars: ExemplarBoxes | None = None  # with every phrase

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
    phrase: str  # as cleaned
    used_phrase: str | None = None  # as SAM 3 read it (cut to its limit); None: not reported
    masks: list[RleMask]
    boxes: list[tuple[float, float, float, float]]
    scores: list[float]


class SegmentResponse(BaseModel):
    """Answer to ``POST /v1/segment``."""

    image_id: str
    image_size: tuple[int, int]
    results: list[PhraseResult]


class VideoLimits(BaseModel):
    """Answer to ``GET /v1/videos``: the service tracks videos, within these bounds."""

    max_video_bytes: int  # a video file or a tar of frames
    max_video_frames: int
    max_pixels: int  # of one frame


class VideoUploadResponse(BaseModel):
    """Answer to ``POST /v1/videos``."""

    video_id: str = Field(pattern=VIDEO_ID_PATTERN)
    kind: Literal["file", "frames"]
    frame_count: int  # frames that could be read
    size: tuple[int, int]  # as displayed (rotation applied)
    fps: float | None  # None for frames or a file that declares none
    note: str | None = None  # why fewer frames than declared can be read, if so


class TrackRequest(BaseModel):
    """Body of ``POST /v1/videos/{video_id}/track``: the frames tracked are ``frames`` or the
    selection ``stride``/``max_frames``/``start_s``/``end_s`` (a time range on frames needs
    ``fps``), as ``sam3-agent track`` chooses them (all frames by default)."""

    model_config = ConfigDict(extra="forbid")

    phrases: Phrases
    score_threshold: Threshold = 0.5  # tracks scoring below it are dropped
    frames: list[int] | None = Field(default=None, min_length=1)
    stride: int = Field(default=1, ge=1)
    max_frames: int | None = Field(default=None, ge=1)
    start_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    end_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    fps: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)

    @field_validator("frames")
    @classmethod
    def _frames_increase(cls, frames: list[int] | None) -> list[int] | None:
        if frames is not None:
            if frames[0] < 0:
                raise ValueError("frame indices start at 0")
            if any(b <= a for a, b in itertools.pairwise(frames)):
                raise ValueError("frame indices must be strictly increasing")
        return frames

    @model_validator(mode="after")
    def _frames_or_selection(self) -> TrackRequest:
        selected = (self.stride, self.max_frames, self.start_s, self.end_s) != (1, None, None, None)
        if self.frames is not None and selected:
            raise ValueError("give frames or a selection (stride, max_frames, start_s, end_s)")
        return self


class TrackJson(BaseModel):
    """One object (:class:`~sam3_agent.values.tracks.Track`); keys are frame positions among
    the frames tracked, present frames only."""

    track_id: int
    score: float = Field(allow_inf_nan=False)
    masks: dict[int, RleMask]
    boxes: dict[int, tuple[float, float, float, float]] = {}


class TracksJson(BaseModel):
    """What one phrase found (:meth:`~sam3_agent.values.tracks.Tracks.to_json`); checked
    to fit its frames and size."""

    frame_count: int = Field(ge=1)
    size: tuple[int, int]
    tracks: list[TrackJson]

    @model_validator(mode="after")
    def _masks_fit(self) -> TracksJson:
        for track in self.tracks:
            for position, rle in track.masks.items():
                if not 0 <= position < self.frame_count:
                    raise ValueError(
                        f"track {track.track_id} has a mask at frame position {position}, "
                        f"outside 0..{self.frame_count - 1}"
                    )
                if tuple(rle.size) != tuple(self.size):
                    raise ValueError(f"a mask of size {rle.size} in tracks of size {self.size}")
            if any(not all(map(math.isfinite, box)) for box in track.boxes.values()):
                raise ValueError("boxes must be finite")
        return self


class TrackResult(BaseModel):
    phrase: str  # as cleaned
    used_phrase: str | None = None  # as SAM 3 read it; None: not reported
    tracks: TracksJson


class TrackResponse(BaseModel):
    """Answer to ``POST /v1/videos/{video_id}/track``."""

    video_id: str
    frames_used: list[int]  # frame position p is video frame frames_used[p]
    size: tuple[int, int]
    results: list[TrackResult]
