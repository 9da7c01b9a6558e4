"""Backends: SAM 3 segmenters and chat models behind two small Protocols (see ``base``).

The Protocols are imported on first use, so that light modules of this package (option
checks, generation settings) do not pull in numpy and OpenCV through ``base``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sam3_agent.backends.base import ChatModel, ImageEmbedding, Segmenter

__all__ = ["ChatModel", "ImageEmbedding", "Segmenter"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sam3_agent.backends import base

        return getattr(base, name)
    raise AttributeError(f"module 'sam3_agent.backends' has no attribute {name!r}")
