"""The agent core: the loop, its steps, tools, checks, context policies and checkpoints
(public names imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sam3_agent.values.lazy import lazy_exports

if TYPE_CHECKING:
    from sam3_agent.agent.events import MaskCheck, RoundEvent
    from sam3_agent.agent.loop import Sam3Agent

__getattr__ = lazy_exports(
    __name__,
    {
        "MaskCheck": "sam3_agent.agent.events",
        "RoundEvent": "sam3_agent.agent.events",
        "Sam3Agent": "sam3_agent.agent.loop",
    },
)

__all__ = ["MaskCheck", "RoundEvent", "Sam3Agent"]
