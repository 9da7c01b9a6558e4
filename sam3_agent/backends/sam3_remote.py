"""SAM 3 through the HTTP service (``sam3-agent serve-sam3``).

:class:`ServiceClient` is the connection every client of the service shares (the image
client here, the video client in :mod:`sam3_agent.backends.sam3_remote_video`): the URL,
the bearer token, one ``httpx.Client`` (one connection pool) for its lifetime, retries, the
one-line errors and the preflight :meth:`~ServiceClient.check`.

:class:`RemoteSegmenter` implements the same :class:`~sam3_agent.backends.base.Segmenter`
Protocol as the in-process backend. It uploads each image once (raw RGB bytes by default,
or a PNG: lossless either way, so the server's content hash equals ours; see
:mod:`sam3_agent.backends.wire` for the measured choice) and asks for masks in row order
(decoded without a copy); its :class:`ServiceClient` retries connection failures, timeouts
and 5xx answers with exponential backoff (a busy service's ``Retry-After`` wins) before
raising :class:`~sam3_agent.values.errors.SegmenterError`. Every failure reaches the caller as
a one-line :class:`~sam3_agent.values.errors.SegmenterError`.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import cv2
import httpx
import numpy as np
from pydantic import BaseModel, ValidationError

from sam3_agent.backends.identity import sam3_description
from sam3_agent.backends.retry import RetryPolicy, retry_after
from sam3_agent.backends.schemas import (
    ErrorCode,
    HealthResponse,
    SegmentResponse,
    UploadResponse,
)
from sam3_agent.backends.segment_args import check_rgb_image, check_segment_args, clean_phrase
from sam3_agent.backends.service_auth import TOKEN_ENV
from sam3_agent.backends.wire import RAW_RGB_MIME, decode_masks, encode_raw
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.images import RGBImage, image_digest

logger = logging.getLogger(__name__)

_Model = TypeVar("_Model", bound=BaseModel)
# Ids of images this client uploaded, to skip re-uploads; the server may still evict them.
_KNOWN_UPLOADS = 1024
# Phrases whose reading the service reported, per image handle.
_KNOWN_PHRASES = 256
# A service's Retry-After is honoured up to this many seconds.
_MAX_RETRY_AFTER_S = 60.0
UploadFormat = Literal["raw", "png"]


class PhraseReadings:
    """Phrases as a service's SAM 3 read them, the ``_KNOWN_PHRASES`` most recently
    remembered (for a remote handle's ``used_phrase``). Thread-safe."""

    def __init__(self) -> None:
        self._used: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, phrase: str) -> str:
        """How ``phrase`` was last read; ``phrase`` itself if it never was remembered."""
        with self._lock:
            return self._used.get(phrase, phrase)

    def remember(self, phrase: str, used: str) -> None:
        with self._lock:
            self._used[phrase] = used
            self._used.move_to_end(phrase)
            while len(self._used) > _KNOWN_PHRASES:
                self._used.popitem(last=False)


class RemoteEmbedding:
    """An image uploaded to the service; segments phrases there.

    Keeps a reference to the pixels so it can upload them again if the server evicted them.
    """

    def __init__(
        self, owner: RemoteSegmenter, image: RGBImage, image_id: str, image_size: tuple[int, int]
    ) -> None:
        self._owner = owner
        self._image = image
        self.image_id = image_id
        """The server's id of the image (its content hash)."""
        self._image_size = image_size
        self._readings = PhraseReadings()

    @property
    def image_size(self) -> tuple[int, int]:
        """``(height, width)`` of the image in pixels."""
        return self._image_size

    def used_phrase(self, phrase: str) -> str:
        """``phrase`` as the service's SAM 3 read it in the last :meth:`segment` call that
        asked for it; ``phrase`` itself if none did or the service did not say."""
        return self._readings.read(phrase)

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        """One :class:`Detections` per phrase, in order, computed by the service.

        Masks ``(N, H, W)`` bool at the image's resolution, boxes ``(N, 4)`` XYXY pixels.

        Raises:
            UserError: a bare string, a blank phrase, or a threshold outside ``[0, 1]``.
            SegmenterError: the service failed or refused after retries.
        """
        check_segment_args(phrases, score_threshold)
        if not phrases:
            return []
        return self._owner._segment(self, list(phrases), score_threshold)

    def _reuploaded(self) -> str:
        self.image_id = self._owner._upload(self._image, image_digest(self._image))
        return self.image_id


class ServiceClient:
    """One connection to a SAM 3 service, shared by the clients of its endpoints.

    Thread-safe (``httpx.Client`` is). Every failure reaches the caller as a one-line
    :class:`~sam3_agent.values.errors.SegmenterError`.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Connect lazily to the service at ``url`` (e.g. ``http://gpu-box:8100``).

        Args:
            token: bearer token, when the service requires one; ``None`` reads
                ``SAM3_AGENT_TOKEN`` from the environment.
            timeout_s: per request (the wait for an answer included).
            retries: extra attempts after a connection error, timeout or 5xx answer.
            backoff_s: wait before the first retry; doubles for each further one.
            transport: an ``httpx`` transport (tests use ``httpx.MockTransport``).

        Raises:
            UserError: not an http(s) URL, or a bad number.
        """
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise UserError(f"SAM 3 service URL must be http(s)://host[:port], got {url!r}")
        if retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise UserError("retries and backoff_s must be >= 0 and timeout_s > 0")
        if token is None:
            token = os.environ.get(TOKEN_ENV) or None
        self.given_url = url
        """The URL as given (what :meth:`describe` reports)."""
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

    def describe(self) -> dict[str, Any]:
        """The service, by its URL as given (see :mod:`~sam3_agent.backends.identity`)."""
        return sam3_description(url=self.given_url)

    def check(self) -> None:
        """Check that the service answers (``GET /health``) and takes the token
        (``GET /v1/health``), before anything that costs money: the agent calls this
        before its first chat-model request. A success is remembered.

        A service too old to have ``/v1/health`` passes on its health alone (its token is
        then checked by the first upload).

        Raises:
            SegmenterError: unreachable after retries, not a SAM 3 service, or refusing
                the token.
        """
        if self._checked:
            return
        health = self.send("GET", "/health")
        if health.status_code != 200:
            raise SegmenterError(
                f"{self.url} does not answer as a SAM 3 service: GET /health gave HTTP "
                f"{health.status_code} ({_error_message(health)})"
            )
        self.parse(HealthResponse, health)
        authorized = self.send("GET", "/v1/health")
        if authorized.status_code == 404:
            logger.info("SAM 3 service at %s has no /v1/health; token checked on use", self.url)
        else:
            self.raise_for_error(authorized, "health")
        self._checked = True

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried on connection errors, timeouts and 5xx answers (a busy
        service's ``Retry-After`` wins over the backoff).

        A body sent as an iterable of chunks must be iterable again for each attempt (a
        list, or an object whose ``__iter__`` starts over; not a generator).

        Raises:
            SegmenterError: every attempt failed.
        """
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
            # Progress, not a problem yet: the error says so if the last retry fails too (debug
            # logging shows these lines).
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

    def raise_for_error(self, response: httpx.Response, what: str) -> None:
        """Nothing for a success; else the service's one-line error, naming ``what``.

        Raises:
            SegmenterError: a 4xx answer (a refused token says how to pass one).
        """
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

    @staticmethod
    def error_code(response: httpx.Response) -> str | None:
        """The ``code`` of a 404 answer (``unknown_image``, ``unknown_video``, ...), else None."""
        return _error_code(response)

    def parse(self, model: type[_Model], response: httpx.Response) -> _Model:
        """The answer's body as ``model``.

        Raises:
            SegmenterError: the body does not validate (one line: the first problem).
        """
        try:
            return model.model_validate_json(response.content)
        except ValidationError as e:
            raise SegmenterError(
                f"SAM 3 service at {self.url} sent an unexpected answer: {e.error_count()} "
                f"problem(s), first: {e.errors()[0]['msg']}"
            ) from e


class ServiceBackend:
    """A client of the SAM 3 service that owns its connection (:class:`ServiceClient`):
    ``close()`` it, or use it as a context manager."""

    def __init__(self, url: str, token: str | None, **connection: Any) -> None:
        """Its own :class:`ServiceClient` (``connection``: that class's keyword arguments),
        and the bodies it uploaded (digest -> the service's id), guarded by ``_lock``."""
        self._service = ServiceClient(url, token, **connection)
        self.url = self._service.url
        self._uploaded: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """The service, by its URL as given (see :mod:`~sam3_agent.backends.identity`)."""
        return self._service.describe()

    def close(self) -> None:
        """Close the connection pool."""
        self._service.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RemoteSegmenter(ServiceBackend):
    """A SAM 3 service as a :class:`~sam3_agent.backends.base.Segmenter`. Thread-safe."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        upload_format: UploadFormat = "raw",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Connect lazily to the service at ``url`` (e.g. ``http://gpu-box:8100``).

        Args:
            timeout_s: per request; a first request on a new image includes its backbone.
            upload_format: ``raw`` RGB bytes (no encoding time, 3 bytes a pixel: best on a
                LAN) or ``png`` (level 1: about half the bytes, seconds of CPU per photo).
            token, retries, backoff_s, transport: as :class:`ServiceClient` takes them.
        """
        if upload_format not in ("raw", "png"):
            raise UserError(f"upload_format must be 'raw' or 'png', got {upload_format!r}")
        super().__init__(
            url,
            token,
            timeout_s=timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            transport=transport,
        )
        self._upload_format = upload_format

    def check(self) -> None:
        """The service's :meth:`ServiceClient.check` (health and token), remembered.

        Raises:
            SegmenterError: unreachable after retries, not a SAM 3 service, or refusing
                the token.
        """
        self._service.check()

    def embed(self, image: RGBImage) -> RemoteEmbedding:
        """Upload an ``(H, W, 3)`` uint8 RGB image unless this client already did.

        The backbone runs on the server at the first segment request for the image.

        Raises:
            UserError: not an ``(H, W, 3)`` uint8 array.
            SegmenterError: the upload failed or was refused.
        """
        check_rgb_image(image)
        digest = image_digest(image)
        with self._lock:
            image_id = self._uploaded.get(digest)
            if image_id is not None:
                self._uploaded.move_to_end(digest)
        if image_id is None:
            image_id = self._upload(image, digest)
        return RemoteEmbedding(self, image, image_id, (int(image.shape[0]), int(image.shape[1])))

    def _upload(self, image: RGBImage, digest: str) -> str:
        if self._upload_format == "raw":
            height, width = int(image.shape[0]), int(image.shape[1])
            response = self._service.send(
                "POST",
                "/v1/images",
                content=encode_raw(image),
                params={"height": height, "width": width},
                headers={"Content-Type": RAW_RGB_MIME},
            )
        else:
            bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
            ok, png = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            if not ok:
                raise SegmenterError("could not encode the image as PNG for upload")
            response = self._service.send(
                "POST",
                "/v1/images",
                content=png.tobytes(),
                headers={"Content-Type": "image/png"},
            )
        self._service.raise_for_error(response, "upload")
        uploaded = self._service.parse(UploadResponse, response)
        with self._lock:
            self._uploaded[digest] = uploaded.image_id
            while len(self._uploaded) > _KNOWN_UPLOADS:
                self._uploaded.popitem(last=False)
        logger.debug("uploaded image %s", uploaded.image_id[:12])
        return uploaded.image_id

    def _segment(
        self, embedding: RemoteEmbedding, phrases: list[str], score_threshold: float
    ) -> list[Detections]:
        # Sent cleaned (the service would clean them the same way): a lone surrogate
        # cannot even be encoded as UTF-8.
        sent = [clean_phrase(p) for p in phrases]

        def request(image_id: str) -> httpx.Response:
            body = {
                "image_id": image_id,
                "phrases": sent,
                "score_threshold": score_threshold,
                "rle_order": "rows",
            }
            return self._service.send("POST", "/v1/segment", json=body)

        response = request(embedding.image_id)
        if self._service.error_code(response) == ErrorCode.UNKNOWN_IMAGE:
            logger.info("server evicted image %s; uploading it again", embedding.image_id[:12])
            response = request(embedding._reuploaded())
        self._service.raise_for_error(response, "segment")
        parsed = self._service.parse(SegmentResponse, response)
        if len(parsed.results) != len(phrases) or tuple(parsed.image_size) != embedding.image_size:
            raise SegmenterError(
                f"SAM 3 service answered {len(parsed.results)} results for an image of "
                f"{parsed.image_size}; expected {len(phrases)} for {embedding.image_size}"
            )
        out: list[Detections] = []
        try:
            for phrase, text, result in zip(phrases, sent, parsed.results, strict=True):
                masks = decode_masks(
                    [m.model_dump() for m in result.masks], "rows", embedding.image_size
                )
                out.append(
                    Detections(
                        masks=masks,
                        boxes=np.asarray(result.boxes, dtype=np.float32).reshape(-1, 4),
                        scores=np.asarray(result.scores, dtype=np.float32),
                    )
                )
                embedding._readings.remember(
                    phrase, text if result.used_phrase is None else result.used_phrase
                )
        except (ValueError, KeyError, TypeError) as e:
            raise SegmenterError(f"SAM 3 service sent malformed masks: {e}") from e
        return out


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
