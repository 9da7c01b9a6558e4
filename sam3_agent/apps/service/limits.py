"""The SAM 3 service's limits (no web stack: ``--help`` imports them); a body or image is held
only inside a slot, so peak memory does not grow with the clients."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sam3_agent.values.errors import UserError

MIB = 1024 * 1024
RETRY_AFTER_S = 1
"""``Retry-After`` (seconds) of a 503 answered when the service is at its bounds."""
SMALL_BODY_BYTES = 64 * 1024
"""A segment request declaring at most this many bytes is read without an upload slot."""


@dataclass(frozen=True, kw_only=True)
class ServiceLimits:
    """Every bound of one service app (``create_app``, ``serve``, ``serve-sam3``)."""

    max_upload_bytes: int = 64 * MIB
    """Largest encoded image file accepted (raw RGB uploads are bounded by the pixel limit)."""
    max_pixels: int = 50_000_000
    """Largest ``width * height`` accepted, read from the header before decoding."""
    max_stored_images: int = 64
    """Decoded images kept for later requests (LRU)."""
    max_stored_bytes: int = 2048 * MIB
    """Memory for decoded images kept for later requests (LRU)."""
    max_concurrent_decodes: int = 2
    """Images decoded at the same time; each holds its body and its pixels while it decodes."""
    max_concurrent_uploads: int = 4
    """Requests carrying an image (uploads, inline base64) that may hold it at once."""
    max_concurrent_segments: int = 4
    """Segment requests at work at once (model calls, masks, RLE encoding)."""
    max_video_bytes: int = 512 * MIB
    """Largest video upload (a video file, or a tar of frames), streamed to disk."""
    max_video_frames: int = 10_000
    """Most frames an uploaded video may have."""
    max_stored_video_bytes: int = 4096 * MIB
    """Disk for uploaded videos kept for later track requests (LRU)."""
    max_concurrent_tracks: int = 1
    """Track requests at work at once: SAM 3's video model tracks one clip at a time."""
    max_waiting: int = 64
    """Requests of each kind that may wait for a slot (0 allowed); past that: 503."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            least = 0 if field.name == "max_waiting" else 1
            if value < least:
                raise UserError(f"{field.name} must be >= {least}, got {value}")


DEFAULT_LIMITS = ServiceLimits()
"""The bounds of a service started without limits of its own (``serve-sam3``'s defaults)."""
