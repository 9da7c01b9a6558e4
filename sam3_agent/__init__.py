"""sam3-agent: a multimodal LLM that uses SAM 3 as a tool to segment what a person describes.

The one call most applications need::

    from sam3_agent import Sam3Agent
    result = Sam3Agent(segmenter, chat_model).run("photo.jpg", "the leftmost child")
"""

from __future__ import annotations

__version__ = "0.1.0"

from sam3_agent.agent import RoundEvent, Sam3Agent
from sam3_agent.config import AgentConfig
from sam3_agent.detections import Detections
from sam3_agent.result import AgentResult

__all__ = ["AgentConfig", "AgentResult", "Detections", "RoundEvent", "Sam3Agent", "__version__"]
