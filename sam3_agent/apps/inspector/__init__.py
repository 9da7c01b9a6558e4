"""``sam3-agent inspect``: a session round by round, in the terminal (:mod:`.terminal`) or as
HTML (:mod:`.html_page`), each renderer imported only by who needs it."""

from __future__ import annotations

from sam3_agent.apps.inspector.model import load_run

__all__ = ["load_run"]
