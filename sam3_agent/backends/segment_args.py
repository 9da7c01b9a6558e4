"""Argument checks shared by every :class:`~sam3_agent.backends.base.ImageEmbedding`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sam3_agent.values.errors import UserError

MAX_PHRASE_CHARS = 200
"""Longest phrase the agent's tool schema and the SAM 3 service's request schema accept.

SAM 3's text encoder reads 32 tokens (about 30 words of English); backends cut longer
phrases to that and report the cut (``ImageEmbedding.used_phrase``). This bound on
characters is the rule a model can see in the schema, shared so both schemas agree.
"""


def check_segment_args(phrases: Sequence[str], score_threshold: float) -> None:
    """Refuse a bare string, blank phrases and thresholds outside ``[0, 1]``.

    Raises:
        UserError: naming what was expected and what arrived.
    """
    if isinstance(phrases, str):
        raise UserError("phrases must be a sequence of strings, not one string")
    if not 0.0 <= score_threshold <= 1.0:
        raise UserError(f"score_threshold must be in [0, 1], got {score_threshold}")
    for phrase in phrases:
        if not isinstance(phrase, str) or not phrase.strip():
            raise UserError(f"each phrase must be a non-empty string, got {phrase!r}")


def check_rgb_image(image: object) -> None:
    """Refuse anything but an ``(H, W, 3)`` uint8 array with at least one pixel.

    Raises:
        UserError: naming the shape or dtype that arrived.
    """
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", type(image).__name__)
        raise UserError(f"embed needs an (H, W, 3) uint8 RGB array, got {shape}")
    if image.dtype != np.uint8:
        raise UserError(f"embed needs a uint8 image, got dtype {image.dtype}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise UserError(f"embed needs a non-empty image, got shape {image.shape}")
