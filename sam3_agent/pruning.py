"""Three-part pruning; moved to :mod:`sam3_agent.context.sam3` (kept here for importers)."""

from __future__ import annotations

from sam3_agent.context.base import Context
from sam3_agent.context.sam3 import (
    MAX_KEPT_ROUNDS,
    MAX_MESSAGES,
    anchor_index,
    build_context,
    kept_indices,
)

__all__ = [
    "MAX_KEPT_ROUNDS",
    "MAX_MESSAGES",
    "Context",
    "anchor_index",
    "build_context",
    "kept_indices",
]
