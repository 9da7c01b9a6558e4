"""Settings of one agent, as frozen dataclasses with a docstring per field and its check
declared on the field, so every refusal reads "`name` must be <what>, got <value>"."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from sam3_agent.values.errors import UserError

ToolProtocol = Literal["tags", "native"]
TOOL_PROTOCOLS: tuple[ToolProtocol, ...] = ("tags", "native")
ToolSet = Literal["paper", "extended"]
TOOL_SETS: tuple[ToolSet, ...] = ("paper", "extended")
"""The agent's tool sets (:mod:`sam3_agent.agent.tools`), the default first."""
CONTEXT_POLICIES: tuple[str, ...] = (
    "sam3", "keep-all", "fifo", "decay", "summary", "hierarchical", "attention", "auto",
)  # fmt: skip
"""Names of the context policies (:mod:`sam3_agent.agent.context`), the default first."""
STEP_KINDS_WEIGHTED = ("segment", "examine", "correction")
_DECAY_WEIGHTS = (("segment", 1.0), ("examine", 1.5), ("correction", 1.2))
DEFAULT_MAX_PIXELS = 120_000_000  # largest width * height of an input image (12000 x 10000)


def setting(
    default: Any, test: Callable[[Any], bool], expected: str, *, optional: bool = False
) -> Any:
    """A dataclass field whose values must pass ``test`` (``expected``: what they must be, for
    the message); ``optional``: ``None`` passes too."""
    return field(default=default, metadata={"check": (test, expected, optional)})


def at_least(default: Any, low: int, *, optional: bool = False) -> Any:
    return setting(default, lambda v: v >= low, f">= {low}", optional=optional)


def between(default: Any, low: float, high: float, expected: str) -> Any:
    return setting(default, lambda v: low <= v <= high, expected)


def positive(default: Any, expected: str, *, optional: bool = False) -> Any:
    """A finite number above 0 (NaN and infinity are refused)."""
    return setting(default, lambda v: math.isfinite(v) and v > 0, expected, optional=optional)


def check_settings(settings: Any) -> None:
    """Run the checks declared on ``settings``' fields in order; the first failing raises."""
    for f in fields(settings):
        check = f.metadata.get("check")
        if check is None:
            continue
        test, expected, optional = check
        value = getattr(settings, f.name)
        if (value is None and optional) or test(value):
            continue
        shown = repr(value) if isinstance(value, str) else value
        raise UserError(f"`{f.name}` must be {expected}, got {shown}")


@dataclass(frozen=True)
class AgentConfig:
    """How an agent session runs; every field has a safe default."""

    max_rounds: int = at_least(100, 1)
    """Main-conversation MLLM calls per session (not mask checks); then it ends ``failed``."""
    max_corrections: int = at_least(10, 0)
    """Corrective messages (model mistakes) per session; then it ends ``failed``."""
    max_mask_checks: int = at_least(200, 0)
    """Isolated mask-check calls per session; then ``examine_each_mask`` is refused."""
    check_concurrency: int = at_least(8, 1)
    """Mask checks that may run at the same time."""
    verdict_retries: int = at_least(1, 0)
    """Re-asks of a checker reply without a clear verdict before it counts as Reject."""
    score_threshold: float = between(0.5, 0.0, 1.0, "in [0, 1]")
    """SAM 3 detections scoring below this are dropped."""
    overlap_threshold: float = between(0.3, 0.0, 1.0, "in [0, 1]")
    """A mask overlapping a kept higher-scoring one by more than this share of the smaller
    mask's area is dropped."""
    max_image_side: int = at_least(1024, 1)
    """Longer side of images sent to the MLLM (downscaled to it)."""
    jpeg_quality: int = between(90, 1, 100, "in [1, 100]")
    """JPEG quality of images sent to the MLLM."""
    max_image_pixels: int = at_least(DEFAULT_MAX_PIXELS, 1)
    """Largest ``width * height`` of an input image, refused from the header before decoding."""
    tool_protocol: ToolProtocol = setting(  # noqa: RUF009 (a field(), immutable default)
        "tags", lambda v: v in TOOL_PROTOCOLS, "'tags' or 'native'"
    )
    """``tags``: ``<tool>{json}</tool>`` in the reply text; ``native``: the API's tool calls."""
    tool_set: ToolSet = setting(  # noqa: RUF009 (a field(), immutable default)
        "paper", lambda v: v in TOOL_SETS, "'paper' or 'extended'"
    )
    """``paper``: the four tools of the SAM 3 agent paper; ``extended``: also exemplars
    (``like``/``unlike`` on ``segment_phrase``) and ``keep_masks``, an answer across phrases."""
    context_policy: str = setting(
        "sam3", lambda v: v in CONTEXT_POLICIES, f"one of {', '.join(CONTEXT_POLICIES)}"
    )
    """How each main call's context is chosen from the history (:mod:`sam3_agent.agent.context`);
    ``attention`` needs the in-process transformers MLLM."""
    max_context_tokens: int = 32768
    """The model's context window; a session whose pinned context cannot fit (less
    ``context_reserve_tokens``) ends ``failed`` before the call."""
    context_reserve_tokens: int = at_least(1024, 0)
    """Tokens kept free for the reply; below ``max_context_tokens``."""
    context_watermark: float = setting(0.7, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
    """Share of the budget at which ``hierarchical`` archives and ``auto`` switches to it."""
    decay_rate: float = at_least(0.15, 0)
    """``decay``: a round's score is ``weight(kind) * exp(-decay_rate * age_in_rounds)``."""
    decay_weights: tuple[tuple[str, float], ...] = _DECAY_WEIGHTS
    """``decay``: weight per step kind; a correction outweighs a search so a refused call stays
    in view longer than the searches before it (the model would repeat it otherwise)."""
    attention_window: int = at_least(3, 1)
    """``attention``: calls over which each round's attention mass is averaged."""
    prompts_dir: Path | None = None
    """Another prompt set (every template of ``prompts/``), checked when the agent is built;
    None: the canonical set."""

    def __post_init__(self) -> None:
        check_settings(self)
        if self.max_context_tokens <= self.context_reserve_tokens:
            raise UserError(
                f"`max_context_tokens` ({self.max_context_tokens}) must exceed the reply reserve "
                f"(`context_reserve_tokens={self.context_reserve_tokens}`)"
            )
        for kind, weight in self.decay_weights:
            if kind not in STEP_KINDS_WEIGHTED or weight < 0:
                raise UserError(
                    f"`decay_weights`: expected kinds {', '.join(STEP_KINDS_WEIGHTED)} with "
                    f"weights >= 0, got {kind!r}={weight}"
                )

    def to_dict(self) -> dict[str, object]:
        """The settings as JSON-safe values (paths as strings)."""
        doc: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.prompts_dir is not None:
            doc["prompts_dir"] = str(self.prompts_dir)
        # As JSON reads it back (lists), so a stored copy compares equal to a fresh one.
        doc["decay_weights"] = [[kind, weight] for kind, weight in self.decay_weights]
        if self.tool_set == "paper":
            # Absent at its default: sessions and runs from before the setting compare equal.
            del doc["tool_set"]
        return doc


@dataclass(frozen=True)
class VideoOptions:
    """What the video agent shows the model (the frames tracked: :class:`FrameSelection`)."""

    frames_shown: int = between(6, 1, 16, "between 1 and 16")
    """Frames on each sheet of the main conversation (where the tracks are): a round's image
    tokens, whatever the clip's length."""
    check_frames: int = between(4, 1, 16, "between 1 and 16")
    """Frames one track's isolated check sees."""
    uncertain_looks: int = between(1, 0, 4, "between 0 and 4")
    """Further looks after an Uncertain verdict, over the frames the checker named (else the
    track's extent, denser); still Uncertain, the track stays and the main model decides."""

    def __post_init__(self) -> None:
        check_settings(self)

    def describe(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class FrameSelection:
    """Which frames of a video a session uses."""

    stride: int = at_least(1, 1)
    """Use every ``stride``-th frame."""
    max_frames: int | None = at_least(None, 1, optional=True)
    """At most this many frames (after the stride and the time range); ``None``: all."""
    start_s: float | None = setting(
        None, lambda v: math.isfinite(v) and v >= 0, "a time in seconds >= 0", optional=True
    )
    """Skip frames before this time (seconds from the start)."""
    end_s: float | None = setting(
        None, lambda v: math.isfinite(v) and v >= 0, "a time in seconds >= 0", optional=True
    )
    """Skip frames after this time (seconds from the start)."""
    fps: float | None = positive(None, "a positive number", optional=True)
    """Frame rate of a frame folder (files carry their own), needed for its time range."""

    def __post_init__(self) -> None:
        check_settings(self)
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise UserError(f"`end_s` ({self.end_s}) must be after `start_s` ({self.start_s})")

    @property
    def has_time_range(self) -> bool:
        return self.start_s is not None or self.end_s is not None

    def describe(self) -> dict[str, float | int | None]:
        """The selection as JSON values (results and checkpoint fingerprints)."""
        return asdict(self)
