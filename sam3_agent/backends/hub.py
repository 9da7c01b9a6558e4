"""Can every model of the run be loaded, from here or the hub? :func:`locate` answers in
seconds (one ``config.json`` fetch per hub id not cached); :func:`hub_access` guards each
loader with a short TCP probe (offline, ``from_pretrained`` retries for minutes)."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from sam3_agent.values.errors import WeightsUnavailableError

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 3.0  # name lookup included

Probe = Callable[[str, float], bool]


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set now (huggingface_hub reads it only at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_endpoint() -> str:
    """The hub's base URL: ``HF_ENDPOINT`` when set, else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def can_connect(endpoint: str, timeout_s: float) -> bool:
    """Whether a TCP connection to ``endpoint`` opens within ``timeout_s`` (in a thread
    abandoned when it overruns: name lookup has no timeout of its own)."""
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


# What ``from_pretrained`` loads weights from (an index names shards), in the cache and in
# a local directory.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def cached_file(repo_id: str, filename: str = "config.json") -> Path | None:
    """``filename`` of the hub model ``repo_id`` in the local hub cache, or None; no download."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename)
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def is_cached(repo_id: str) -> bool:
    """Whether the hub cache holds ``repo_id``'s config and weights (not a config alone)."""
    if cached_file(repo_id) is None:
        return False
    return any(cached_file(repo_id, f) is not None for f in WEIGHT_FILES)


def hub_access(source: str, *, what: str, setting: str, probe: Probe | None = None) -> bool:
    """``local_files_only`` for ``from_pretrained(source)``: with the hub unreachable a cached
    model loads from the cache, any other is refused. ``what``: its role in messages (``"SAM
    3"``); ``setting``: how to name a local directory instead (``"`sam3='DIR'`"``)."""
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
        f"({setting})."
    )


@dataclass(frozen=True)
class ModelRef:
    """One model a run loads in this process; ``what`` and ``setting`` as in :func:`hub_access`."""

    source: str
    what: str
    setting: str


@dataclass(frozen=True)
class Located:
    """A model's ``config.json`` here, or why it is ``missing`` (one clause, what to do)."""

    model: ModelRef
    config: Path | None = None
    missing: str | None = None


class ModelMissing(Exception):
    """The hub cannot give a model; the message says why and what to do (one clause)."""


class Hub(Protocol):
    """The network side of :func:`locate` (:class:`HfHub`; a fake in tests)."""

    @property
    def endpoint(self) -> str: ...

    def reachable(self) -> bool: ...

    def fetch_config(self, repo_id: str) -> Path: ...  # raises ModelMissing


class HfHub:
    """The Hugging Face hub at :func:`hub_endpoint` (``HF_TOKEN`` or a saved login)."""

    def __init__(self, *, probe: Probe | None = None, cache_dir: Path | None = None) -> None:
        self.endpoint = hub_endpoint()
        self._probe = probe or can_connect
        self._cache_dir = cache_dir
        self._reachable: bool | None = None

    def reachable(self) -> bool:
        if self._reachable is None:
            self._reachable = self._probe(self.endpoint, PROBE_TIMEOUT_S)
        return self._reachable

    def fetch_config(self, repo_id: str) -> Path:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
        )

        page = f"{self.endpoint}/{repo_id}"
        try:
            return Path(
                hf_hub_download(
                    repo_id,
                    "config.json",
                    endpoint=self.endpoint,
                    cache_dir=self._cache_dir,
                    etag_timeout=PROBE_TIMEOUT_S,
                )
            )
        except GatedRepoError as e:
            raise ModelMissing(
                f"gated on the hub: accept its licence on {page}, then set HF_TOKEN to a "
                "token of that account (or run `hf auth login`)"
            ) from e
        except RepositoryNotFoundError as e:
            raise ModelMissing(
                f"no such model on the hub at {self.endpoint} (a typo? a private model needs "
                "HF_TOKEN)"
            ) from e
        except RemoteEntryNotFoundError as e:
            raise ModelMissing(
                f"{page} has no config.json: not a model transformers can load"
            ) from e
        except HfHubHTTPError as e:
            status = e.response.status_code if e.response is not None else "an error"
            why = " (HF_TOKEN refused?)" if status in (401, 403) else ""
            raise ModelMissing(f"the hub answered HTTP {status} for {page}{why}") from e
        except LocalEntryNotFoundError as e:
            raise ModelMissing(f"cannot fetch it from {self.endpoint} (connection lost?)") from e
        except Exception as e:  # the HTTP client's own errors are not OSError
            raise ModelMissing(
                f"cannot fetch it from {self.endpoint}: {type(e).__name__}: "
                f"{first_line(e, 'no detail')}"
            ) from e


def locate(model: ModelRef, hub: Hub) -> Located:
    """Where ``model`` is, loading nothing; the hub is asked only about a hub id not cached."""
    from huggingface_hub.utils import validate_repo_id

    source = model.source
    local = Path(source).expanduser()
    if local.is_dir():
        config = local / "config.json"
        if not config.is_file():
            return Located(model, missing=f"no config.json in {local}")
        if not any(next(local.glob(p), None) for p in WEIGHT_PATTERNS):
            return Located(model, config, missing=f"no weight files (*.safetensors) in {local}")
        return Located(model, config)
    if source.startswith((".", "/", "~")) or local.exists():
        return Located(model, missing=f"no directory {local}")
    try:
        validate_repo_id(source)
    except ValueError:
        return Located(model, missing="neither a local directory nor a hub id (ORG/NAME)")
    if is_cached(source):
        return Located(model, cached_file(source))
    if local.parent.is_dir() and local.parent != Path("."):
        # ORG/NAME beside a folder ORG here: a mistyped directory more likely than a hub id.
        return Located(
            model,
            missing=f"neither a local directory (there is no {local}) nor a hub model in the "
            f"local cache; check the path, or fetch the hub model first (`hf download {source}`)",
        )
    elsewhere = (
        f"download it where there is network (`hf download {source}`), then set "
        f"HF_HUB_OFFLINE=1, or pass a local directory ({model.setting})"
    )
    if hub_offline():
        why = f"HF_HUB_OFFLINE is set and it is not in the local cache; {elsewhere}"
        return Located(model, missing=why)
    if not hub.reachable():
        return Located(
            model,
            missing=f"cannot reach the Hugging Face hub at {hub.endpoint} (no network?) and it "
            f"is not in the local cache; {elsewhere}",
        )
    try:
        return Located(model, hub.fetch_config(source))
    except ModelMissing as e:
        return Located(model, missing=str(e))


def check_located(located: Sequence[Located]) -> None:
    """Raise WeightsUnavailableError naming, in one line, every model found missing."""
    missing = [f for f in located if f.missing]
    if not missing:
        return
    if len(missing) == 1:
        (only,) = missing
        raise WeightsUnavailableError(
            f"cannot load {only.model.what} {only.model.source!r} (no model was loaded): "
            f"{only.missing}"
        )
    parts = " ".join(
        f"{i}) {f.model.what} {f.model.source!r}: {f.missing}." for i, f in enumerate(missing, 1)
    )
    raise WeightsUnavailableError(
        f"cannot load {len(missing)} models of this run (none was loaded): {parts}"
    )


def first_line(error: BaseException, empty: str = "") -> str:
    """The first line of ``error``'s message; ``empty`` when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else empty
