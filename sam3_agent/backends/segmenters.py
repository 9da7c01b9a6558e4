"""Build the SAM 3 segmenter the CLI and API ask for (in-process or remote)."""

from __future__ import annotations

from sam3_agent.backends.base import Segmenter
from sam3_agent.errors import UserError

DEFAULT_SAM3_MODEL = "facebook/sam3"


def build_segmenter(
    *,
    model: str = DEFAULT_SAM3_MODEL,
    url: str | None = None,
    token: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    cache_size: int = 8,
) -> Segmenter:
    """An in-process SAM 3 (``model``: hub id or local dir) or, with ``url``, a remote one."""
    raise UserError("the SAM 3 backends are not wired yet")  # replaced by the SAM 3 issue
