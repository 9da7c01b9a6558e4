"""SAM 3 as an HTTP service, so one GPU machine can segment for many agents.

Start it with ``sam3-agent serve-sam3`` (``--video`` to track videos too); agents reach it
through :class:`sam3_agent.backends.sam3_remote.RemoteSegmenter` and
:class:`sam3_agent.backends.sam3_remote_video.RemoteVideoSegmenter`. The wire format is in
:mod:`sam3_agent.backends.schemas` and :mod:`sam3_agent.backends.wire`, the app in
:mod:`sam3_agent.apps.service.app` (the video endpoints in
:mod:`sam3_agent.apps.service.videos`). The web stack is imported only when the app is built,
so the CLI's ``--help`` does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sam3_agent.apps.service.app import create_app
    from sam3_agent.apps.service.server import check_bind_security, is_loopback, serve

__all__ = ["check_bind_security", "create_app", "is_loopback", "serve"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from sam3_agent.apps.service.app import create_app

        return create_app
    if name in ("check_bind_security", "is_loopback", "serve"):
        from sam3_agent.apps.service import server

        return getattr(server, name)
    raise AttributeError(name)
