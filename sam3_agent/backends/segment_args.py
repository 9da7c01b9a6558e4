"""Argument checks shared by every :class:`~sam3_agent.backends.base.ImageEmbedding`."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np

from sam3_agent.media.video import VideoSource
from sam3_agent.values.errors import UserError

# The agent's tool schema's limit (SAM 3 reads 32 tokens; backends cut and say so in
# ``used_phrase``), and any segmenter's (a query segmented as it is may be long).
MAX_PHRASE_CHARS = 200
MAX_SEGMENT_PHRASE_CHARS = 1000


def _joined(phrase: str) -> str:
    """``phrase`` with each surrogate pair made the one character it encodes, as a JSON
    decoder reads ``"\\ud83d\\ude00"``; lone surrogates stay."""
    if not any("\ud800" <= c <= "\udfff" for c in phrase):
        return phrase
    return phrase.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def clean_phrase(phrase: str) -> str:
    """The one sanitiser of phrases (every backend, the service): control characters and lone
    surrogates become spaces, whitespace collapses, ends are stripped."""
    if phrase.isprintable() and " ".join(phrase.split()) == phrase:
        return phrase
    kept = (" " if unicodedata.category(c) in ("Cc", "Cs") else c for c in _joined(phrase))
    return " ".join("".join(kept).split())


def phrase_problem(phrase: object) -> str | None:
    """Why ``phrase`` is refused, or None: the one rule of every backend and the service."""
    if not isinstance(phrase, str):
        return f"each phrase must be a string, got {type(phrase).__name__}"
    length = len(_joined(phrase))
    if length > MAX_SEGMENT_PHRASE_CHARS:
        return f"a phrase may have at most {MAX_SEGMENT_PHRASE_CHARS} characters, got {length}"
    if not clean_phrase(phrase):
        shown = ascii(phrase)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return f"each phrase must be non-empty text (not only blanks or controls), got {shown}"
    return None


def check_segment_args(phrases: Sequence[str], score_threshold: float) -> None:
    """Refuse a bare string, phrases :func:`phrase_problem` refuses, and thresholds outside
    ``[0, 1]``."""
    if isinstance(phrases, str):
        raise UserError("phrases must be a sequence of strings, not one string")
    if not 0.0 <= score_threshold <= 1.0:
        raise UserError(f"score_threshold must be in [0, 1], got {score_threshold}")
    for phrase in phrases:
        problem = phrase_problem(phrase)
        if problem is not None:
            raise UserError(problem)


def check_rgb_image(image: object) -> None:
    """Refuse anything but an ``(H, W, 3)`` uint8 array with at least one pixel."""
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", type(image).__name__)
        raise UserError(f"embed needs an (H, W, 3) uint8 RGB array, got {shape}")
    if image.dtype != np.uint8:
        raise UserError(f"embed needs a uint8 image, got dtype {image.dtype}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise UserError(f"embed needs a non-empty image, got shape {image.shape}")


def check_video_source(video: object) -> None:
    """Refuse anything but a :class:`VideoSource`, what a video segmenter opens."""
    if not isinstance(video, VideoSource):
        raise UserError(f"open needs a VideoSource (see open_video), got {type(video).__name__}")
