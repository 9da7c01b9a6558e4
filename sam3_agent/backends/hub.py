"""Before loading a hub id: is the Hugging Face hub reachable, or is the model cached?

Without network, ``from_pretrained`` on a hub id retries for minutes and then blames the
licence. :func:`hub_access` answers in about a second instead: a short TCP connect to the
hub's endpoint (``HF_ENDPOINT``, default ``https://huggingface.co``) decides whether the
network is there; when it is not, a model already in the local cache is loaded from the
cache alone, and anything else is refused in one line that says what to do.

Both in-process loaders (SAM 3 and the transformers MLLM) call :func:`hub_access` and pass
its answer as ``local_files_only``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from sam3_agent.backends.torch_runtime import hub_offline
from sam3_agent.values.errors import WeightsUnavailableError

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 3.0
"""How long the connect probe waits (name lookup included) before calling the hub unreachable."""

Probe = Callable[[str, float], bool]


def hub_endpoint() -> str:
    """The hub's base URL: ``HF_ENDPOINT`` when set, else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def can_connect(endpoint: str, timeout_s: float) -> bool:
    """Whether a TCP connection to ``endpoint``'s host and port opens within ``timeout_s``.

    Name lookup has no timeout of its own, so the whole attempt runs in a worker thread
    that is abandoned (not joined) when it overruns.
    """
    parts = urlsplit(endpoint)
    host = parts.hostname
    if not host:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)

    def connect() -> bool:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(connect).result(timeout=timeout_s)
    except (OSError, concurrent.futures.TimeoutError):
        return False
    finally:
        pool.shutdown(wait=False)


def is_cached(repo_id: str) -> bool:
    """Whether the hub cache holds ``repo_id``'s ``config.json`` (at its ``main`` revision)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


def hub_access(source: str, *, what: str, flag: str, probe: Probe | None = None) -> bool:
    """Decide how ``from_pretrained(source)`` may run; returns ``local_files_only``.

    ``source`` that is a local directory, or ``HF_HUB_OFFLINE`` set: nothing to probe
    (``True`` with ``HF_HUB_OFFLINE``). Otherwise the hub endpoint is probed: reachable
    gives ``False`` (a normal download or cache check); unreachable gives ``True`` when the
    model is cached (logged once) and raises otherwise.

    Args:
        source: a hub id or a local directory.
        what: the model's role in messages (``"SAM 3"``, ``"the MLLM"``).
        flag: how the CLI names a local directory instead (``"--sam3 DIR"``).
        probe: ``(endpoint, timeout_s) -> reachable``; :func:`can_connect` by default
            (tests pass a fake: they never touch the network).

    Raises:
        WeightsUnavailableError: the hub is unreachable and the model is not cached.
    """
    if Path(source).expanduser().is_dir():
        return False
    if hub_offline():
        return True
    endpoint = hub_endpoint()
    if (probe or can_connect)(endpoint, PROBE_TIMEOUT_S):
        return False
    if is_cached(source):
        logger.warning("%s unreachable: loading %s from the local cache", endpoint, source)
        return True
    raise WeightsUnavailableError(
        f"cannot reach the Hugging Face hub at {endpoint} (no network?) to fetch {what} "
        f"{source!r}, and it is not in the local cache. Download it where there is network "
        f"(`hf download {source}`), then set HF_HUB_OFFLINE=1, or pass a local directory "
        f"({flag})."
    )
