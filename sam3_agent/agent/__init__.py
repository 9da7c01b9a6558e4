"""The agent core: the loop, its steps, tools, checks, context policies and checkpoints.

Layer 3 of 5 (values -> backends -> agent -> runs -> apps): modules here import
``sam3_agent.values`` and ``sam3_agent.backends``, never ``runs`` or ``apps``.

Public names are imported on first use, so importing one submodule (``agent.result``, say)
does not load the whole loop.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sam3_agent.agent.events import MaskCheck, RoundEvent
    from sam3_agent.agent.loop import Sam3Agent

_EXPORTS = {"MaskCheck": "events", "RoundEvent": "events", "Sam3Agent": "loop"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # ``sam3_agent.agent.api`` and the like, reached as attributes before an import.
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'sam3_agent.agent' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["MaskCheck", "RoundEvent", "Sam3Agent"]
