"""``sam3-agent inspect``: a session shown round by round from its run directory.

:func:`~sam3_agent.apps.inspector.model.load_run` reads the directory into views;
:mod:`.terminal` prints them with rich, :mod:`.html_page` writes one self-contained HTML
file (images inlined, no network, every string from the trace escaped). The renderers are
imported by whoever needs them, so importing this package stays light.
"""

from __future__ import annotations

from sam3_agent.apps.inspector.model import load_run
from sam3_agent.apps.inspector.views import RunView

__all__ = ["RunView", "load_run"]
