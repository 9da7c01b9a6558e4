"""What every client of the SAM 3 service (``sam3-agent serve-sam3``) shares: one connection
pool, the token, retries (``Retry-After`` wins), one-line errors, the preflight check, and
uploads sent again when the service evicted them."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from sam3_agent.backends.identity import TOKEN_ENV, sam3_description
from sam3_agent.backends.lru import Lru
from sam3_agent.backends.retry import RetryPolicy, retry_after
from sam3_agent.backends.schemas import ErrorCode, HealthResponse
from sam3_agent.backends.segment_args import check_segment_args, clean_phrase
from sam3_agent.values.detections import Exemplars
from sam3_agent.values.errors import SegmenterError, UserError

logger = logging.getLogger(__name__)

_Model = TypeVar("_Model", bound=BaseModel)
_KNOWN_UPLOADS = 1024  # the server may still evict them
_KNOWN_PHRASES = 256  # per handle
_MAX_RETRY_AFTER_S = 60.0


class RemoteHandle:
    """An upload on the service (an image, a video) that phrases are asked on; remembers how
    the service read the most recent ``_KNOWN_PHRASES``. Thread-safe."""

    def __init__(self, owner: ServiceBackend) -> None:
        self._owner = owner
        self._used: Lru[str, str] = Lru(_KNOWN_PHRASES)

    def used_phrase(self, phrase: str) -> str:
        used = self._used.get(phrase, touch=False)
        return phrase if used is None else used

    def _remember(self, phrase: str, sent: str, used: str | None) -> None:
        self._used.put(phrase, sent if used is None else used)

    def _ask(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Any]:
        """The owner's answers, one per phrase, each phrase sent cleaned (the service cleans
        them the same way: a lone surrogate cannot even be encoded as UTF-8)."""
        check_segment_args(phrases, score_threshold)
        if not phrases:
            return []
        sent = [clean_phrase(p) for p in phrases]
        answers = self._owner._answer(self, sent, score_threshold, exemplars)
        for phrase, text, (_, used) in zip(phrases, sent, answers, strict=True):
            self._remember(phrase, text, used)
        return [value for value, _ in answers]


class ServiceBackend:
    """One connection (one ``httpx`` pool) to a SAM 3 service, the base of its image and video
    clients; remembers its uploads (digest -> the service's id) so none is sent twice.
    Thread-safe; every failure is a one-line SegmenterError."""

    default_timeout_s = 120.0
    _known_uploads = _KNOWN_UPLOADS
    _unknown = ErrorCode.UNKNOWN_IMAGE  # a 404's code: the service no longer holds the upload
    _evicted = "server evicted image %s; uploading it again"

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float | None = None,
        retries: int = 3,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Connect lazily to ``url``. ``token`` ``None`` reads ``SAM3_AGENT_TOKEN``;
        ``retries`` follow connection errors, timeouts and 5xx answers, the first after
        ``backoff_s``, doubling."""
        timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise UserError(f"SAM 3 service URL must be http(s)://host[:port], got {url!r}")
        if retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise UserError("retries and backoff_s must be >= 0 and timeout_s > 0")
        if token is None:
            token = os.environ.get(TOKEN_ENV) or None
        self._given_url = url
        self.url = str(parsed).rstrip("/")
        # backoff_s as documented: the wait itself, doubling, with no jitter and no ceiling.
        self._retry = RetryPolicy(
            max_retries=retries,
            backoff_base_s=backoff_s,
            backoff_cap_s=math.inf,
            max_retry_after_s=_MAX_RETRY_AFTER_S,
            jitter=False,
        )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout_s, transport=transport
        )
        self._checked = False
        self._uploaded: Lru[str, str] = Lru(self._known_uploads)

    def describe(self) -> dict[str, Any]:
        return sam3_description(url=self._given_url)

    def check(self) -> None:
        """Check that the service answers (``/health``) and takes the token (``/v1/health``;
        a service without it passes on its health alone). A success is remembered."""
        if self._checked:
            return
        health = self._send("GET", "/health")
        if health.status_code != 200:
            raise SegmenterError(
                f"{self.url} does not answer as a SAM 3 service: GET /health gave HTTP "
                f"{health.status_code} ({_error_message(health)})"
            )
        self._parse(HealthResponse, health)
        authorized = self._send("GET", "/v1/health")
        if authorized.status_code == 404:
            logger.info("SAM 3 service at %s has no /v1/health; token checked on use", self.url)
        else:
            self._raise_for_error(authorized, "health")
        self._checked = True

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried (a busy service's ``Retry-After`` wins over the backoff). A
        body sent as chunks must be iterable again for each attempt (not a generator)."""
        attempts = self._retry.max_retries + 1
        for attempt in range(1, attempts + 1):
            cause: Exception | None = None
            asked_s: float | None = None
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.HTTPError as e:  # connection, timeout, protocol, decoding, redirects
                cause = e
                failure = f"{type(e).__name__}: {e}"
            else:
                if response.status_code < 500:
                    return response
                failure = f"HTTP {response.status_code}: {_error_message(response)}"
                asked_s = retry_after(response)
            if attempt == attempts:
                fix = ""
                if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout)):
                    fix = "; is the service running there (`sam3-agent serve-sam3`)?"
                raise SegmenterError(
                    f"SAM 3 service at {self.url} failed {attempts} time(s) on {path}: "
                    f"{failure}{fix}"
                ) from cause
            wait = self._retry.delay(attempt, asked_s)
            # Progress, not a problem yet: the error says so if the last retry fails too.
            logger.info(
                "SAM 3 service %s%s failed (%s); retry %d/%d in %.2fs",
                self.url,
                path,
                failure,
                attempt,
                self._retry.max_retries,
                wait,
            )
            time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _raise_for_error(self, response: httpx.Response, what: str) -> None:
        """Raise the service's one-line error for a 4xx answer, naming ``what``."""
        if response.status_code < 400:
            return
        message = _error_message(response)
        if response.status_code == 401:
            raise SegmenterError(
                f"SAM 3 service at {self.url} refused the token ({message}); pass the server's "
                f"token (`sam3_token`, or {TOKEN_ENV})"
            )
        raise SegmenterError(
            f"SAM 3 service at {self.url} refused the {what} request "
            f"(HTTP {response.status_code}): {message}"
        )

    def _parse(self, model: type[_Model], response: httpx.Response) -> _Model:
        try:
            return model.model_validate_json(response.content)
        except ValidationError as e:
            raise SegmenterError(
                f"SAM 3 service at {self.url} sent an unexpected answer: {e.error_count()} "
                f"problem(s), first: {e.errors()[0]['msg']}"
            ) from e

    def _post(self, what: str, model: type[_Model], path: str, **kwargs: Any) -> _Model:
        response = self._send("POST", path, **kwargs)
        self._raise_for_error(response, what)
        return self._parse(model, response)

    def _answer(
        self,
        handle: Any,
        sent: list[str],
        score_threshold: float,
        exemplars: Exemplars | None = None,
    ) -> list[tuple[Any, str | None]]:
        """Per phrase sent: the answer and how the service read the phrase (``exemplars``:
        boxes on an image, sent with every phrase)."""
        raise NotImplementedError

    def _ask(
        self,
        upload_id: str,
        request: Callable[[str], httpx.Response],
        reupload: Callable[[], str],
        what: str,
        model: type[_Model],
    ) -> _Model:
        """``request``'s answer on ``upload_id``, asked again on ``reupload()``'s id when the
        service no longer holds the upload."""
        response = request(upload_id)
        if _error_code(response) == self._unknown:
            logger.info(self._evicted, upload_id[:12])
            response = request(reupload())
        self._raise_for_error(response, what)
        return self._parse(model, response)


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _error_code(response: httpx.Response) -> str | None:
    code = _error_body(response).get("code") if response.status_code == 404 else None
    return code if isinstance(code, str) else None


def _error_message(response: httpx.Response) -> str:
    error = _error_body(response).get("error")
    if isinstance(error, str):
        return error
    return response.text[:200] or response.reason_phrase
