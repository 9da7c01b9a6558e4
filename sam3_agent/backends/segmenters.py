"""Build the SAM 3 segmenters asked for: images or video, in process or the SAM 3 service."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads DEFAULT_SAM3_MODEL without numpy or OpenCV
    from sam3_agent.backends.base import Segmenter, VideoSegmenter

DEFAULT_SAM3_MODEL = "facebook/sam3"  # holds the image and the video model
DEFAULT_VIDEO_CACHE_MB = 512


def build_segmenter(
    *,
    model: str = DEFAULT_SAM3_MODEL,
    url: str | None = None,
    token: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    cache_size: int = 8,
    timeout_s: float = 120.0,
    retries: int = 3,
) -> Segmenter:
    """An in-process SAM 3 or, with ``url``, the service there (``token``, ``timeout_s`` and
    ``retries`` apply to it)."""
    if url:
        from sam3_agent.backends.sam3_remote import RemoteSegmenter

        return RemoteSegmenter(url, token, timeout_s=timeout_s, retries=retries)
    from sam3_agent.backends.sam3_local import Sam3Segmenter

    return Sam3Segmenter.from_pretrained(model, device=device, dtype=dtype, cache_size=cache_size)


def build_video_segmenter(
    *,
    model: str = DEFAULT_SAM3_MODEL,
    url: str | None = None,
    token: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    cache_bytes: int = DEFAULT_VIDEO_CACHE_MB * 1024**2,
    timeout_s: float | None = None,
    retries: int = 3,
) -> VideoSegmenter:
    """SAM 3's video model in this process, keeping ``cache_bytes`` of backbone features
    across phrases; or, with ``url``, the service there."""
    if url:
        from sam3_agent.backends.sam3_remote import RemoteVideoSegmenter

        # timeout_s None: the client's own default, the time to track a whole clip.
        return RemoteVideoSegmenter(url, token, timeout_s=timeout_s, retries=retries)
    from sam3_agent.backends.sam3_video import Sam3VideoSegmenter

    return Sam3VideoSegmenter.from_pretrained(
        model, device=device, dtype=dtype, feature_cache_bytes=cache_bytes
    )
