"""``sam3-agent inspect``: a session shown round by round from its run directory, in the
terminal (:mod:`.terminal`) or as one self-contained HTML file (:mod:`.html_page`). The
renderers are imported by whoever needs them, so importing this package stays light.
"""

from __future__ import annotations

from sam3_agent.apps.inspector.model import load_run

__all__ = ["load_run"]
