"""sam3-agent: a multimodal LLM that uses SAM 3 as a tool to segment what a person describes.

The one call most applications need::

    import sam3_agent
    result = sam3_agent.segment("photo.jpg", "the leftmost child")

For many requests, build the backends and a :class:`Sam3Agent` once and call ``run``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from sam3_agent.agent import RoundEvent, Sam3Agent
from sam3_agent.api import segment
from sam3_agent.config import AgentConfig
from sam3_agent.detections import Detections
from sam3_agent.result import AgentResult

__all__ = [
    "AgentConfig",
    "AgentResult",
    "Detections",
    "RoundEvent",
    "Sam3Agent",
    "__version__",
    "segment",
]
