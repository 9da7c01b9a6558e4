"""Running the SAM 3 service (and the demo): the bind-address rule, the port, uvicorn. Sockets
are bound here, so a port taken while the models loaded is a one-line :class:`UserError`."""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.apps.service.limits import DEFAULT_LIMITS, ServiceLimits
from sam3_agent.backends.identity import TOKEN_ENV
from sam3_agent.values.errors import Sam3AgentError, UserError

if TYPE_CHECKING:  # serve-sam3 --help and the demo's flag check import no numpy
    from sam3_agent.backends.base import Segmenter, VideoSegmenter

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_security(
    host: str,
    token: str | None,
    *,
    serving: str = "listen",
    token_env: str = TOKEN_ENV,
    spends: str = "use the GPU",
) -> None:
    """Refuse to listen beyond loopback without a bearer token (every server's one rule)."""
    if not is_loopback(host) and not token:
        raise UserError(
            f"refusing to {serving} on {host} without a token: anyone who can reach it could "
            f"{spends}. Pass --token or set {token_env}, or listen on 127.0.0.1."
        )


def bind_listeners(host: str, port: int, *, listen: bool = True) -> list[socket.socket]:
    """Sockets bound to ``port`` on every address ``host`` names, as uvicorn binds them."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as e:
        raise UserError(f"cannot listen on {host}: {e.strerror}") from e
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            if listen:
                sock.listen()
    except OSError as e:
        for sock in sockets:
            sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use") from e
        raise UserError(f"cannot listen on {host} port {port}: {e.strerror or e}") from e
    return sockets


def check_port_free(host: str, port: int) -> None:
    """Refuse, before anything loads, a port another process listens on."""
    for sock in bind_listeners(host, port, listen=False):
        sock.close()


def run_app(app: Any, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve the ASGI ``app`` with uvicorn in this process until interrupted."""
    import uvicorn

    listeners = bind_listeners(host, port)
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1)
    )
    try:
        server.run(sockets=listeners)
    except KeyboardInterrupt:  # Ctrl+C stops a server: a normal end, as with uvicorn.run
        pass
    except SystemExit as e:  # uvicorn's way of saying it could not start
        raise Sam3AgentError(f"the server on {host} port {port} did not start") from e
    finally:
        for sock in listeners:
            sock.close()


def serve(
    segmenter: Segmenter,
    *,
    host: str = "127.0.0.1",
    port: int = 8100,
    token: str | None = None,
    limits: ServiceLimits = DEFAULT_LIMITS,
    video_segmenter: VideoSegmenter | None = None,
    video_dir: Path | None = None,
    log_level: str = "info",
) -> None:
    """Serve ``segmenter`` (and ``video_segmenter``) over HTTP until interrupted."""
    from sam3_agent.apps.service.app import create_app

    check_bind_security(host, token)
    app = create_app(
        segmenter,
        token=token or None,
        limits=limits,
        video_segmenter=video_segmenter,
        video_dir=video_dir,
    )
    logger.info(
        "SAM 3 service on http://%s:%d (token %s, videos %s)",
        host,
        port,
        "required" if token else "off",
        "on" if video_segmenter is not None else "off",
    )
    try:
        run_app(app, host=host, port=port, log_level=log_level)
    finally:
        if app.state.videos is not None:  # also when the app's shutdown did not run
            app.state.videos.close()
