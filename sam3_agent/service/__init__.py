"""SAM 3 as an HTTP service, so one GPU machine can segment for many agents.

Start it with ``sam3-agent serve-sam3``; agents reach it through
:class:`sam3_agent.backends.sam3_remote.RemoteSegmenter`. The wire format is in
:mod:`sam3_agent.service.schemas`, the app in :mod:`sam3_agent.service.app`.
"""

from __future__ import annotations

from sam3_agent.service.app import create_app
from sam3_agent.service.server import check_bind_security, is_loopback, serve

__all__ = ["check_bind_security", "create_app", "is_loopback", "serve"]
