"""The SAM 3 service's wire format, shared by the server and its clients
(:class:`~sam3_agent.backends.sam3_remote.RemoteSegmenter`,
:class:`~sam3_agent.backends.sam3_remote_video.RemoteVideoSegmenter`).

Sizes are ``[height, width]`` in pixels, boxes ``[x1, y1, x2, y2]`` in pixels of the
original image, masks COCO RLE (``{"size": [H, W], "counts": str}``). Every error response
is ``{"error": str, "code": str}`` plus ``details`` for validation errors.
"""

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

VIDEO_ID_PATTERN = r"^[0-9a-f]{64}$"
"""A video id is the SHA-256 hash of the uploaded body (the video file, or the tar)."""

TAR_MIME = "application/x-tar"
"""Content type of a video uploaded as its frames: an uncompressed tar whose members are
``.jpg``/``.jpeg``/``.png`` files at its top level, the frames in name order (directory
entries are ignored). Any other body is read as a video file."""


def check_phrases(phrases: list[str]) -> list[str]:
    """The in-process backend's rule, so every path accepts the same phrases.

    Raises:
        ValueError: the first phrase refused, and why.
    """
    for phrase in phrases:
        problem = phrase_problem(phrase)
        if problem is not None:
            raise ValueError(problem)
    return phrases


Phrases = Annotated[
    list[str], Field(min_length=1, max_length=MAX_PHRASES), AfterValidator(check_phrases)
]
"""Noun phrases; one result per phrase, in order. Accepted and cleaned by the rule of every
backend (:func:`~sam3_agent.backends.segment_args.phrase_problem`,
:func:`~sam3_agent.backends.segment_args.clean_phrase`)."""
Threshold = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class ErrorCode:
    """Machine-readable ``code`` values of error responses."""

    UNKNOWN_IMAGE = "unknown_image"
    UNKNOWN_VIDEO = "unknown_video"
    """404: no stored video has the id (never uploaded, or evicted): upload it again."""
    NO_VIDEO = "video_off"
    """404: the service was started without ``--video``."""
    BAD_VIDEO = "bad_video"
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
    phrases: Phrases
    score_threshold: Threshold = 0.5
    """Detections scoring at or below this are dropped."""
    rle_order: RleOrder = "coco"
    """How masks are encoded (:data:`sam3_agent.backends.wire.RleOrder`)."""

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


class VideoLimits(BaseModel):
    """Answer to ``GET /v1/videos``: the service tracks videos, within these bounds."""

    max_video_bytes: int
    """Largest upload (a video file or a tar of frames)."""
    max_video_frames: int
    """Most frames a video may have."""
    max_pixels: int
    """Largest ``width * height`` of a frame."""


class VideoUploadResponse(BaseModel):
    """Answer to ``POST /v1/videos``."""

    video_id: str = Field(pattern=VIDEO_ID_PATTERN)
    kind: Literal["file", "frames"]
    """A video file, or a tar of frame images."""
    frame_count: int
    """Frames that could be read (frame indices run ``0..frame_count-1``)."""
    size: tuple[int, int]
    """``[height, width]`` of the frames as displayed (rotation applied)."""
    fps: float | None
    """The file's frame rate; None for frames or a file that declares none."""
    note: str | None = None
    """Why fewer frames than the file declares can be read (a truncated file), if so."""


class TrackRequest(BaseModel):
    """Body of ``POST /v1/videos/{video_id}/track``.

    The frames tracked are either ``frames`` (video frame indices, increasing) or the
    selection ``stride`` / ``max_frames`` / ``start_s`` / ``end_s`` (``fps``: a time range on
    frames needs it), as ``sam3-agent track`` chooses them (all frames by default).
    """

    model_config = ConfigDict(extra="forbid")

    phrases: Phrases
    score_threshold: Threshold = 0.5
    """Tracks scoring below this are dropped."""
    frames: list[int] | None = Field(default=None, min_length=1)
    """Frame indices of the video to track, strictly increasing (instead of a selection)."""
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
    """One object through the frames it appears in
    (:class:`~sam3_agent.values.tracks.Track`)."""

    track_id: int
    score: float = Field(allow_inf_nan=False)
    masks: dict[int, RleMask]
    """Frame position (among the frames tracked) -> COCO RLE ``[H, W]``; present frames only."""
    boxes: dict[int, tuple[float, float, float, float]] = {}
    """Frame position -> tight XYXY box in pixels."""


class TracksJson(BaseModel):
    """What one phrase found (:meth:`~sam3_agent.values.tracks.Tracks.to_json`); checked
    to fit its frames and size."""

    frame_count: int = Field(ge=1)
    size: tuple[int, int]
    """``[height, width]`` of every mask."""
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
    phrase: str
    """The request's phrase as cleaned (:func:`~sam3_agent.backends.segment_args.clean_phrase`)."""
    used_phrase: str | None = None
    """The phrase as SAM 3 read it (cut to its text encoder's limit); None: not reported."""
    tracks: TracksJson


class TrackResponse(BaseModel):
    """Answer to ``POST /v1/videos/{video_id}/track``."""

    video_id: str
    frames_used: list[int]
    """Frame indices of the video tracked; a track's frame position ``p`` is frame
    ``frames_used[p]``."""
    size: tuple[int, int]
    """``[height, width]``."""
    results: list[TrackResult]
