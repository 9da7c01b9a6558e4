"""Running the SAM 3 service: the bind-address rule and uvicorn."""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from sam3_agent.apps.service.limits import (
    DEFAULT_MAX_CONCURRENT_DECODES,
    DEFAULT_MAX_CONCURRENT_SEGMENTS,
    DEFAULT_MAX_CONCURRENT_UPLOADS,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MAX_STORED_BYTES,
    DEFAULT_MAX_STORED_IMAGES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_MAX_WAITING,
)
from sam3_agent.backends.service_auth import TOKEN_ENV
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:  # serve-sam3 --help and the demo's flag check import no numpy
    from sam3_agent.backends.base import Segmenter

logger = logging.getLogger(__name__)

__all__ = ["TOKEN_ENV", "check_bind_security", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine.

    ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``) are; any other name or
    address (``0.0.0.0``, ``::``, a LAN address, a host name) is not.
    """
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
    """Refuse to listen beyond loopback without a bearer token: the one rule of every server
    this package runs (the SAM 3 service, the demo).

    Args:
        serving, token_env, spends: the message's words: what would be served, the
            environment variable that holds the token, what a stranger could spend.

    Raises:
        UserError: ``host`` is not loopback and ``token`` is empty.
    """
    if not is_loopback(host) and not token:
        raise UserError(
            f"refusing to {serving} on {host} without a token: anyone who can reach it could "
            f"{spends}. Pass --token or set {token_env}, or listen on 127.0.0.1."
        )


def serve(
    segmenter: Segmenter,
    *,
    host: str = "127.0.0.1",
    port: int = 8100,
    token: str | None = None,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_stored_images: int = DEFAULT_MAX_STORED_IMAGES,
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
    max_concurrent_decodes: int = DEFAULT_MAX_CONCURRENT_DECODES,
    max_concurrent_uploads: int = DEFAULT_MAX_CONCURRENT_UPLOADS,
    max_concurrent_segments: int = DEFAULT_MAX_CONCURRENT_SEGMENTS,
    max_waiting: int = DEFAULT_MAX_WAITING,
    log_level: str = "info",
) -> None:
    """Serve ``segmenter`` over HTTP until interrupted (blocks); the limits are
    :func:`~sam3_agent.apps.service.app.create_app`'s.

    Raises:
        UserError: a non-loopback ``host`` without ``token``.
    """
    import uvicorn

    from sam3_agent.apps.service.app import create_app

    check_bind_security(host, token)
    app = create_app(
        segmenter,
        token=token or None,
        max_upload_bytes=max_upload_bytes,
        max_pixels=max_pixels,
        max_stored_images=max_stored_images,
        max_stored_bytes=max_stored_bytes,
        max_concurrent_decodes=max_concurrent_decodes,
        max_concurrent_uploads=max_concurrent_uploads,
        max_concurrent_segments=max_concurrent_segments,
        max_waiting=max_waiting,
    )
    logger.info(
        "SAM 3 service on http://%s:%d (token %s)", host, port, "required" if token else "off"
    )
    # One process: the model is loaded once and shared by the worker threads.
    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
