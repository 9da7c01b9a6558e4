"""Build the SAM 3 segmenter the CLI and API ask for (in-process or remote)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads DEFAULT_SAM3_MODEL without numpy or OpenCV
    from sam3_agent.backends.base import Segmenter

DEFAULT_SAM3_MODEL = "facebook/sam3"


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
    """An in-process SAM 3 (``model``: hub id or local dir) or, with ``url``, a remote one.

    ``device``, ``dtype`` and ``cache_size`` apply in-process; ``token`` (default: the
    ``SAM3_AGENT_TOKEN`` environment variable), ``timeout_s`` and ``retries`` apply to the
    service at ``url`` (``sam3-agent serve-sam3``).

    Raises:
        WeightsUnavailableError: in-process weights missing, gated or offline.
        UserError: a bad device, dtype or URL.
    """
    if url:
        from sam3_agent.backends.sam3_remote import RemoteSegmenter

        return RemoteSegmenter(url, token, timeout_s=timeout_s, retries=retries)
    from sam3_agent.backends.sam3_local import Sam3Segmenter

    return Sam3Segmenter.from_pretrained(model, device=device, dtype=dtype, cache_size=cache_size)
