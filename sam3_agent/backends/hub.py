"""Before loading anything: can every model of the run be loaded, from here or the hub?

Two questions, answered in seconds instead of after minutes of loading:

* :func:`locate` (called by :meth:`~sam3_agent.backends.spec.BackendSpec.plan` for every
  in-process model of a run, before any of them loads): is each model a local directory
  with its weights, in the local cache, or on the hub? For a hub id not cached it fetches
  only ``config.json`` (a few KB: it proves the repo exists and may be read with this
  machine's token, and gives the memory estimate its parameter count).
  :func:`check_located` then names every missing model in one error.
* :func:`hub_access` (called by both in-process loaders, SAM 3 and the transformers MLLM):
  without network, ``from_pretrained`` on a hub id retries for minutes and then blames the
  licence; a short TCP connect to the hub's endpoint (``HF_ENDPOINT``, default
  ``https://huggingface.co``) decides whether the network is there, a cached model is
  loaded from the cache alone, and anything else is refused in one line.

The network side is :class:`HfHub`; tests replace it with a fake (they never touch the
network).
"""

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


WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
"""The files ``from_pretrained`` loads weights from (one of them; an index names shards)."""

WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
"""Weight files in a local directory (``save_pretrained``, ``hf download --local-dir``)."""


def is_cached(repo_id: str) -> bool:
    """Whether the hub cache holds ``repo_id``'s ``config.json`` and weights (at its
    ``main`` revision): a ``config.json`` alone (fetched for an estimate) is not a model."""
    from huggingface_hub import try_to_load_from_cache

    try:
        if not isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
            return False
        return any(isinstance(try_to_load_from_cache(repo_id, f), str) for f in WEIGHT_FILES)
    except ValueError:  # not a valid repo id
        return False


def hub_access(source: str, *, what: str, setting: str, probe: Probe | None = None) -> bool:
    """Decide how ``from_pretrained(source)`` may run; returns ``local_files_only``.

    ``source`` that is a local directory, or ``HF_HUB_OFFLINE`` set: nothing to probe
    (``True`` with ``HF_HUB_OFFLINE``). Otherwise the hub endpoint is probed: reachable
    gives ``False`` (a normal download or cache check); unreachable gives ``True`` when the
    model is cached (logged once) and raises otherwise.

    Args:
        source: a hub id or a local directory.
        what: the model's role in messages (``"SAM 3"``, ``"the MLLM"``).
        setting: how a caller names a local directory instead (``"`sam3='DIR'`"``).
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
        f"({setting})."
    )


# -- every model of a run, before any loads ----------------------------------------------


@dataclass(frozen=True)
class ModelRef:
    """One model a run loads in this process.

    Attributes:
        source: a hub id or a local directory, as given.
        what: its role in messages (``"SAM 3"``, ``"the MLLM"``).
        setting: how a caller names a local directory instead (``"`sam3='DIR'`"``).
    """

    source: str
    what: str
    setting: str


@dataclass(frozen=True)
class Located:
    """Where :func:`locate` found a model.

    Attributes:
        model: the model asked about.
        config: its ``config.json`` here (a local directory, the hub cache, or fetched from
            the hub just now), when there is one.
        missing: why it cannot be loaded (one clause, with what to do); None: it can.
    """

    model: ModelRef
    config: Path | None = None
    missing: str | None = None


class ModelMissing(Exception):
    """The hub cannot give a model; ``reason`` says why and what to do (one clause)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Hub(Protocol):
    """The network side of :func:`locate` (:class:`HfHub`; a fake in tests)."""

    @property
    def endpoint(self) -> str:
        """The hub's base URL, for messages."""
        ...

    def reachable(self) -> bool:
        """Whether the hub answers at all (asked once per run)."""
        ...

    def fetch_config(self, repo_id: str) -> Path:
        """Download ``repo_id``'s ``config.json`` only, into the hub cache.

        Raises:
            ModelMissing: no such repo, gated, no ``config.json``, or the hub failed.
        """
        ...


class HfHub:
    """The Hugging Face hub at :func:`hub_endpoint`, through ``huggingface_hub`` (which
    reads ``HF_TOKEN`` and a saved login)."""

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
                f"{_first_line(e) or 'no detail'}"
            ) from e


def locate(models: Sequence[ModelRef], hub: Hub) -> list[Located]:
    """Where each of ``models`` is, without loading any; the hub is asked only for hub ids
    not in the local cache (one reachability probe in all, then ``config.json`` each).

    A local directory needs a ``config.json`` and weight files; a hub id in the cache needs
    its weights there. ``HF_HUB_OFFLINE`` set: a hub id not cached is missing. An ``ORG/NAME``
    not cached, where ``ORG`` is a local folder, is a mistyped directory (the hub not asked).
    """
    return [_locate(model, hub) for model in models]


def _locate(model: ModelRef, hub: Hub) -> Located:
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
        from huggingface_hub import try_to_load_from_cache

        return Located(model, Path(str(try_to_load_from_cache(source, "config.json"))))
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
        return Located(model, missing=e.reason)


def check_located(located: Sequence[Located]) -> None:
    """Refuse, in one line naming each, the models :func:`locate` found missing.

    Raises:
        WeightsUnavailableError: at least one model cannot be loaded (none was loaded).
    """
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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
