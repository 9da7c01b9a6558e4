"""sam3-agent: a multimodal LLM that uses SAM 3 as a tool to segment what a person describes:
``sam3_agent.segment("photo.jpg", "the leftmost child")``, ``sam3_agent.track("clip.mp4", ...)``.
For many requests, build the backends and a :class:`Sam3Agent` once and call ``run``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sam3_agent.values.lazy import lazy_exports
from sam3_agent.values.version import __version__

if TYPE_CHECKING:
    from sam3_agent.agent.api import segment, track
    from sam3_agent.agent.loop import RoundEvent, Sam3Agent
    from sam3_agent.agent.result import AgentResult, VideoResult
    from sam3_agent.agent.video.agent import Sam3VideoAgent
    from sam3_agent.values.config import AgentConfig
    from sam3_agent.values.detections import Detections

_EXPORTS = {  # public name -> the module that defines it
    "AgentConfig": "sam3_agent.values.config",
    "AgentResult": "sam3_agent.agent.result",
    "Detections": "sam3_agent.values.detections",
    "RoundEvent": "sam3_agent.agent.loop",
    "Sam3Agent": "sam3_agent.agent.loop",
    "Sam3VideoAgent": "sam3_agent.agent.video.agent",
    "VideoResult": "sam3_agent.agent.result",
    "segment": "sam3_agent.agent.api",
    "track": "sam3_agent.agent.api",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "AgentConfig", "AgentResult", "Detections", "RoundEvent", "Sam3Agent", "Sam3VideoAgent",
    "VideoResult", "__version__", "segment", "track",
]  # fmt: skip
