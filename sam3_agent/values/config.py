"""Settings of one agent, as a frozen dataclass with a docstring per field."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from sam3_agent.values.errors import UserError

ToolProtocol = Literal["tags", "native"]
TOOL_PROTOCOLS: tuple[ToolProtocol, ...] = ("tags", "native")
CONTEXT_POLICIES: tuple[str, ...] = (
    "sam3",
    "keep-all",
    "fifo",
    "decay",
    "summary",
    "hierarchical",
    "attention",
    "auto",
)
"""Names of the context policies (:mod:`sam3_agent.agent.context`), the default first."""
STEP_KINDS_WEIGHTED = ("segment", "examine", "correction")

DEFAULT_MAX_PIXELS = 120_000_000
"""Largest ``width * height`` of an input image by default (a 12000 x 10000 photo)."""


@dataclass(frozen=True)
class AgentConfig:
    """How an agent session runs. Every field has a safe default."""

    max_rounds: int = 100
    """Main-conversation MLLM calls allowed per session (mask checks are not counted here).
    When spent, the session ends with status ``failed``."""

    max_corrections: int = 10
    """Corrective messages (model mistakes) allowed per session before it ends as ``failed``."""

    max_mask_checks: int = 200
    """Isolated mask-check calls allowed per session (their own budget, reported in usage).
    When spent, ``examine_each_mask`` is refused and the model must decide without it."""

    check_concurrency: int = 8
    """Mask checks that may run at the same time."""

    verdict_retries: int = 1
    """How often a checker reply without a clear verdict is asked again before counting
    as Reject."""

    score_threshold: float = 0.5
    """SAM 3 detections scoring below this are dropped."""

    overlap_threshold: float = 0.3
    """A mask overlapping an already kept, higher-scoring mask by more than this share of the
    smaller mask's area is dropped."""

    max_image_side: int = 1024
    """Images sent to the MLLM are downscaled so their longer side is at most this."""

    jpeg_quality: int = 90
    """JPEG quality of images sent to the MLLM."""

    max_image_pixels: int = DEFAULT_MAX_PIXELS
    """Largest ``width * height`` of an input image; larger ones are refused from the file
    header, before decoding (decompression bombs)."""

    tool_protocol: ToolProtocol = "tags"
    """``tags``: tool calls written as ``<tool>{json}</tool>`` in the reply text.
    ``native``: tools declared through the API and returned as structured calls."""

    context_policy: str = "sam3"
    """How each main call's context is chosen from the history (:mod:`sam3_agent.agent.context`):
    ``sam3`` (three-part pruning), ``keep-all``, ``fifo``, ``decay``, ``summary``,
    ``hierarchical``, ``attention`` (in-process transformers MLLM only), ``auto``."""

    max_context_tokens: int = 32768
    """The model's context window in tokens. Every call's messages fit this minus
    ``context_reserve_tokens``; a session whose pinned context cannot fit ends as
    ``failed`` before the call."""

    context_reserve_tokens: int = 1024
    """Tokens kept free for the reply: every call's messages fit ``max_context_tokens``
    minus this. Must be >= 0 and below ``max_context_tokens``."""

    context_watermark: float = 0.7
    """Share of the budget at which ``hierarchical`` starts archiving and ``auto``
    switches to it."""

    decay_rate: float = 0.15
    """``decay``: a round's score is ``weight(kind) * exp(-decay_rate * age_in_rounds)``."""

    decay_weights: tuple[tuple[str, float], ...] = (
        ("segment", 1.0),
        ("examine", 1.5),
        ("correction", 1.2),
    )
    """``decay``: weight per step kind (segment, examine, correction). A correction weighs
    more than a search round so that a refused call stays in view longer than the searches
    before it (the model would repeat it otherwise)."""

    attention_window: int = 3
    """``attention``: calls over which each round's attention mass is averaged."""

    prompts_dir: Path | None = None
    """A directory holding another prompt set (every template of the canonical ``prompts/``);
    None: the canonical set. Checked when the agent is built (see
    :func:`sam3_agent.agent.prompts.load_prompt_set`)."""

    def __post_init__(self) -> None:
        positive = ("max_rounds", "check_concurrency", "max_image_side", "max_image_pixels")
        for name in positive:
            if getattr(self, name) < 1:
                raise UserError(f"`{name}` must be >= 1, got {getattr(self, name)}")
        for name in ("max_corrections", "max_mask_checks", "verdict_retries"):
            if getattr(self, name) < 0:
                raise UserError(f"`{name}` must be >= 0, got {getattr(self, name)}")
        for name in ("score_threshold", "overlap_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UserError(f"`{name}` must be in [0, 1], got {value}")
        if not 1 <= self.jpeg_quality <= 100:
            raise UserError(f"`jpeg_quality` must be in [1, 100], got {self.jpeg_quality}")
        if self.tool_protocol not in TOOL_PROTOCOLS:
            raise UserError(
                f"`tool_protocol` must be 'tags' or 'native', got {self.tool_protocol!r}"
            )
        self._check_context()

    def _check_context(self) -> None:
        if self.context_policy not in CONTEXT_POLICIES:
            raise UserError(
                f"`context_policy` must be one of {', '.join(CONTEXT_POLICIES)}, "
                f"got {self.context_policy!r}"
            )
        if self.context_reserve_tokens < 0:
            raise UserError(
                f"`context_reserve_tokens` must be >= 0, got {self.context_reserve_tokens}"
            )
        if self.max_context_tokens <= self.context_reserve_tokens:
            raise UserError(
                f"`max_context_tokens` ({self.max_context_tokens}) must exceed the reply reserve "
                f"(`context_reserve_tokens={self.context_reserve_tokens}`)"
            )
        if not 0.0 < self.context_watermark <= 1.0:
            raise UserError(f"`context_watermark` must be in (0, 1], got {self.context_watermark}")
        if self.decay_rate < 0:
            raise UserError(f"`decay_rate` must be >= 0, got {self.decay_rate}")
        for kind, weight in self.decay_weights:
            if kind not in STEP_KINDS_WEIGHTED or weight < 0:
                raise UserError(
                    f"`decay_weights`: expected kinds {', '.join(STEP_KINDS_WEIGHTED)} with "
                    f"weights >= 0, got {kind!r}={weight}"
                )
        if self.attention_window < 1:
            raise UserError(f"`attention_window` must be >= 1, got {self.attention_window}")

    def to_dict(self) -> dict[str, object]:
        """The settings as JSON-safe values (paths as strings)."""
        doc: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.prompts_dir is not None:
            doc["prompts_dir"] = str(self.prompts_dir)
        # As JSON reads it back (lists), so a stored copy compares equal to a fresh one.
        doc["decay_weights"] = [[kind, weight] for kind, weight in self.decay_weights]
        return doc


@dataclass(frozen=True)
class VideoOptions:
    """What the video agent shows the model. Every field has a safe default; the frames a
    session tracks are chosen apart (:class:`~sam3_agent.media.video.FrameSelection`)."""

    frames_shown: int = 6
    """Frames on each sheet the main conversation sees (sampled where the tracks exist):
    what one round costs in image tokens, whatever the clip's length."""

    check_frames: int = 4
    """Frames one track's isolated check sees."""

    uncertain_looks: int = 1
    """Further looks a track gets after an Uncertain verdict, each over the frames the
    checker named (or the track's whole extent, denser); still Uncertain after them, the
    track stays and the main model decides."""

    def __post_init__(self) -> None:
        for name in ("frames_shown", "check_frames"):
            value = getattr(self, name)
            if not 1 <= value <= 16:
                raise UserError(f"`{name}` must be between 1 and 16, got {value}")
        if not 0 <= self.uncertain_looks <= 4:
            looks = self.uncertain_looks
            raise UserError(f"`uncertain_looks` must be between 0 and 4, got {looks}")

    def describe(self) -> dict[str, int]:
        return {
            "frames_shown": self.frames_shown,
            "check_frames": self.check_frames,
            "uncertain_looks": self.uncertain_looks,
        }


@dataclass(frozen=True)
class FrameSelection:
    """Which frames of a video a session uses. Every field has a safe default."""

    stride: int = 1
    """Use every ``stride``-th frame."""

    max_frames: int | None = None
    """At most this many frames (after the stride and the time range); ``None``: all."""

    start_s: float | None = None
    """Skip frames before this time (seconds from the start)."""

    end_s: float | None = None
    """Skip frames after this time (seconds from the start)."""

    fps: float | None = None
    """Frames per second of a frame folder (files carry their own); needed for a time range
    on a folder."""

    def __post_init__(self) -> None:
        if self.stride < 1:
            raise UserError(f"`stride` must be >= 1, got {self.stride}")
        if self.max_frames is not None and self.max_frames < 1:
            raise UserError(f"`max_frames` must be >= 1, got {self.max_frames}")
        for name, value in (("`start_s`", self.start_s), ("`end_s`", self.end_s)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise UserError(f"{name} must be a time in seconds >= 0, got {value}")
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise UserError(f"`end_s` ({self.end_s}) must be after `start_s` ({self.start_s})")
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise UserError(f"`fps` must be a positive number, got {self.fps}")

    @property
    def has_time_range(self) -> bool:
        return self.start_s is not None or self.end_s is not None

    def describe(self) -> dict[str, float | int | None]:
        """The selection as JSON values (results and checkpoint fingerprints)."""
        return {
            "stride": self.stride,
            "max_frames": self.max_frames,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "fps": self.fps,
        }
