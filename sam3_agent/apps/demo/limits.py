"""What the demo accepts from a video upload (light: the CLI's flag defaults come from it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sam3_agent.values.config import DEFAULT_MAX_PIXELS
from sam3_agent.values.errors import UserError


@dataclass(frozen=True)
class VideoLimits:
    """What a video upload may be; checked before any model work."""

    max_mb: float = 200.0
    """Largest file, in megabytes (10^6 bytes)."""
    max_frames: int = 300
    """Most frames one request tracks (after its stride): what a session costs SAM 3."""
    max_pixels: int = DEFAULT_MAX_PIXELS
    """Largest frame, width x height (the agent's ``--max-pixels``)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_mb) and self.max_mb > 0):
            raise UserError(f"--max-video-mb must be a size > 0, got {self.max_mb}")
        if self.max_frames < 1:
            raise UserError(f"--max-video-frames must be >= 1, got {self.max_frames}")
        if self.max_pixels < 1:
            raise UserError(f"--max-pixels must be >= 1, got {self.max_pixels}")
