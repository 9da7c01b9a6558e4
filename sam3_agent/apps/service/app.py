"""The FastAPI app of the SAM 3 service.

Endpoints (``/v1/*`` need ``Authorization: Bearer <token>`` when the app has a token):

* ``GET /health`` -> ``{"status": "ok"}``; ``GET /v1/health`` the same once the token is
  checked (clients check both before their first request that costs anything).
* ``POST /v1/images``: the body is an encoded image file (PNG, JPEG, ...; EXIF orientation
  applied, high bit depths rescaled, transparency composited as
  :func:`~sam3_agent.values.images.load_image` does), or raw RGB bytes with content type
  :data:`~sam3_agent.backends.wire.RAW_RGB_MIME` and ``?height=H&width=W``. Answers
  ``{"image_id", "image_size": [H, W]}``; the id is the content hash of the pixels, so
  uploading the same image twice stores it once.
* ``POST /v1/segment``: JSON :class:`~sam3_agent.backends.schemas.SegmentRequest`; answers
  :class:`~sam3_agent.backends.schemas.SegmentResponse` (masks as COCO RLE).

Memory is bounded independently of the number of clients: a request reads its body only
once it holds a slot (``max_concurrent_uploads`` for a body that carries an image,
``max_concurrent_segments`` for segment work), at most ``max_waiting`` requests of each kind
wait for a slot (holding no body), and past that the answer is 503 with ``Retry-After``. A
``Content-Length`` over the limit is refused with 413 before any slot is taken. At most
``max_concurrent_decodes`` images are decoded at once, the decoded-image store holds at most
``max_stored_images`` images and ``max_stored_bytes`` bytes, and a segment request's masks
are encoded to RLE a few phrases at a time.

The server never opens a path named in a request: images arrive as bytes only. Bodies are
read with a size limit, image headers are checked against a pixel limit before decoding
(decompression bombs get 413), and every error is a JSON body with a 4xx/5xx status, never
a stack trace. Decoding and model work run on worker threads, so the event loop stays free;
concurrent requests for one image share the segmenter's cached backbone features.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from sam3_agent.apps.service.limits import (
    DEFAULT_MAX_CONCURRENT_DECODES,
    DEFAULT_MAX_CONCURRENT_SEGMENTS,
    DEFAULT_MAX_CONCURRENT_UPLOADS,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MAX_STORED_BYTES,
    DEFAULT_MAX_STORED_IMAGES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_MAX_WAITING,
    RETRY_AFTER_S,
    SMALL_BODY_BYTES,
)
from sam3_agent.backends.base import Segmenter, phrase_as_read
from sam3_agent.backends.schemas import (
    ErrorCode,
    HealthResponse,
    PhraseResult,
    RleMask,
    SegmentRequest,
    SegmentResponse,
    UploadResponse,
)
from sam3_agent.backends.segment_args import clean_phrase
from sam3_agent.backends.wire import RAW_RGB_MIME, RleOrder, decode_raw, encode_masks
from sam3_agent.values.errors import ImageLoadError, SegmenterError, UserError
from sam3_agent.values.images import ImageTooLargeError, RGBImage, image_digest, load_image
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

# Masks held at once while answering one segment request, in pixels (bool: bytes).
_MASK_BUDGET_PIXELS = 256_000_000
# A JSON body carries the image as base64 (4/3 of the bytes) plus the phrases.
_JSON_OVERHEAD_BYTES = 64 * 1024


class ServiceError(Exception):
    """An error answered as ``{"error": message, "code": code}`` with ``status``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


class ImageStore:
    """A thread-safe LRU of decoded images by id, bounded in count and in bytes."""

    def __init__(self, max_images: int, max_bytes: int) -> None:
        self._max_images = max_images
        self._max_bytes = max_bytes
        self._images: OrderedDict[str, RGBImage] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, image_id: str, image: RGBImage) -> None:
        with self._lock:
            if image_id in self._images:
                self._images.move_to_end(image_id)
                return
            self._images[image_id] = image
            self._bytes += image.nbytes
            # Always keep the newest image, even when it alone exceeds the byte bound.
            while len(self._images) > 1 and (
                len(self._images) > self._max_images or self._bytes > self._max_bytes
            ):
                _, evicted = self._images.popitem(last=False)
                self._bytes -= evicted.nbytes

    def get(self, image_id: str) -> RGBImage | None:
        with self._lock:
            image = self._images.get(image_id)
            if image is not None:
                self._images.move_to_end(image_id)
            return image

    def clear(self) -> None:
        with self._lock:
            self._images.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._images)

    def __contains__(self, image_id: object) -> bool:
        with self._lock:
            return image_id in self._images


class Gate:
    """At most ``slots`` holders at once and ``max_waiting`` more waiting, in arrival order;
    past that, :meth:`hold` answers 503 with ``Retry-After`` at once.

    Lives on one event loop (the server's); ``held`` and ``peak`` are for tests and logs.
    """

    def __init__(self, what: str, slots: int, max_waiting: int) -> None:
        self.what = what
        self.slots = slots
        self.max_waiting = max_waiting
        self.held = 0
        self.waiting = 0
        self.peak = 0
        self.refused = 0
        self._semaphore = asyncio.Semaphore(slots)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """A slot for the body of the ``with``.

        Raises:
            ServiceError: 503 when every slot is held and ``max_waiting`` requests wait.
        """
        if self.held + self.waiting >= self.slots + self.max_waiting:
            self.refused += 1
            raise ServiceError(
                503,
                ErrorCode.BUSY,
                f"the service is busy: {self.held} {self.what} at work and {self.waiting} "
                f"waiting; retry in {RETRY_AFTER_S} s",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.held += 1
        self.peak = max(self.peak, self.held)
        try:
            yield
        finally:
            self.held -= 1
            self._semaphore.release()


def decode_image(data: bytes, max_pixels: int) -> RGBImage:
    """Decode an image file's bytes to ``(H, W, 3)`` uint8 RGB, as it is displayed.

    The pixel count is read from the header before any pixel is decoded.

    Raises:
        ServiceError: 413 over ``max_pixels``, 400 not a readable or convertible image.
    """
    try:
        return load_image(data, max_pixels=max_pixels)
    except ImageTooLargeError as e:
        raise ServiceError(413, ErrorCode.TOO_LARGE, f"refused: {e}") from e
    except (ImageLoadError, UserError) as e:
        raise ServiceError(
            400, ErrorCode.BAD_IMAGE, f"the body is not a readable image: {e}"
        ) from e


def _raw_size(query: dict[str, str], max_pixels: int) -> tuple[int, int]:
    """``(height, width)`` of a raw upload from its query string, checked."""
    try:
        height, width = int(query["height"]), int(query["width"])
    except (KeyError, ValueError) as e:
        raise ServiceError(
            400, ErrorCode.BAD_IMAGE, f"a {RAW_RGB_MIME} body needs ?height=H&width=W integers"
        ) from e
    if height < 1 or width < 1:
        raise ServiceError(400, ErrorCode.BAD_IMAGE, f"bad raw image size {height}x{width}")
    if height * width > max_pixels:
        raise ServiceError(
            413,
            ErrorCode.TOO_LARGE,
            f"image has {width}x{height} = {width * height} pixels; "
            f"this server accepts at most {max_pixels}",
        )
    return height, width


def declared_length(request: Request) -> int | None:
    """The body's ``Content-Length``, or None when it is not given (chunked) or not a number."""
    declared = request.headers.get("content-length", "").strip()
    return int(declared) if declared.isdigit() else None


def refuse_declared_over(request: Request, limit: int) -> None:
    """413 at once when the declared ``Content-Length`` exceeds ``limit``, before any slot."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise ServiceError(
            413, ErrorCode.TOO_LARGE, f"body of {declared} bytes exceeds the {limit}-byte limit"
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it exceeds ``limit`` bytes."""
    refuse_declared_over(request, limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServiceError(413, ErrorCode.TOO_LARGE, f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _error_response(error: ServiceError) -> JSONResponse:
    body: dict[str, Any] = {"error": error.message, "code": error.code}
    if error.details is not None:
        body["details"] = error.details
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def _segment_sync(
    segmenter: Segmenter,
    image: RGBImage,
    image_id: str,
    phrases: list[str],
    score_threshold: float,
    rle_order: RleOrder,
) -> SegmentResponse:
    height, width = int(image.shape[0]), int(image.shape[1])
    embedding = segmenter.embed(image)
    # A few phrases at a time, encoded to RLE at once: the full-size masks of 32 phrases
    # never exist together.
    step = max(1, _MASK_BUDGET_PIXELS // (height * width * 8))
    results: list[PhraseResult] = []
    for start in range(0, len(phrases), step):
        chunk = phrases[start : start + step]
        # The in-process backend's sanitiser: any segmenter behind the service reads the
        # same text SAM 3 in-process would.
        cleaned = [clean_phrase(p) for p in chunk]
        detections = embedding.segment(cleaned, score_threshold)
        for text, det in zip(cleaned, detections, strict=True):
            results.append(
                PhraseResult(
                    phrase=text,
                    used_phrase=phrase_as_read(embedding, text),
                    masks=[
                        RleMask(size=(r["size"][0], r["size"][1]), counts=r["counts"])
                        for r in encode_masks(det.masks, rle_order)
                    ],
                    boxes=[
                        (float(a), float(b), float(c), float(d))
                        for a, b, c, d in det.boxes.tolist()
                    ],
                    scores=[float(s) for s in det.scores.tolist()],
                )
            )
    return SegmentResponse(image_id=image_id, image_size=(height, width), results=results)


def _decode_and_id(data: bytes, max_pixels: int) -> tuple[str, RGBImage]:
    image = decode_image(data, max_pixels)
    return image_digest(image), image


def _raw_and_id(data: bytes, height: int, width: int) -> tuple[str, RGBImage]:
    try:
        image = decode_raw(data, height, width)
    except ValueError as e:
        raise ServiceError(400, ErrorCode.BAD_IMAGE, str(e)) from e
    return image_digest(image), image


def create_app(
    segmenter: Segmenter,
    *,
    token: str | None = None,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_stored_images: int = DEFAULT_MAX_STORED_IMAGES,
    max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
    max_concurrent_decodes: int = DEFAULT_MAX_CONCURRENT_DECODES,
    max_concurrent_uploads: int = DEFAULT_MAX_CONCURRENT_UPLOADS,
    max_concurrent_segments: int = DEFAULT_MAX_CONCURRENT_SEGMENTS,
    max_waiting: int = DEFAULT_MAX_WAITING,
) -> FastAPI:
    """The service app around one segmenter.

    Args:
        segmenter: answers every request; must be thread-safe (``Sam3Segmenter`` is).
        token: when set, ``/v1/*`` requires ``Authorization: Bearer <token>``.
        max_upload_bytes: largest encoded image accepted (413 above).
        max_pixels: largest ``width * height`` accepted (413 above).
        max_stored_images / max_stored_bytes: bounds of the in-memory image LRU.
        max_concurrent_decodes: images decoded at the same time (each decode holds the
            encoded body and the decoded pixels); further requests wait their turn.
        max_concurrent_uploads: requests carrying an image (uploads, inline-base64
            segment requests) holding their body and pixels at once; a body is read only
            inside such a slot.
        max_concurrent_segments: segment requests at work at once.
        max_waiting: requests of each kind waiting for a slot (0 allowed); past that the
            answer is 503 with ``Retry-After``.

    ``app.state.images`` is the :class:`ImageStore`; ``app.state.uploads`` and
    ``app.state.segments`` the :class:`Gate` of each kind.
    """
    if token is not None and not token:
        raise UserError("the service token must not be empty")
    limits = {
        "max_upload_bytes": max_upload_bytes,
        "max_pixels": max_pixels,
        "max_stored_images": max_stored_images,
        "max_stored_bytes": max_stored_bytes,
        "max_concurrent_decodes": max_concurrent_decodes,
        "max_concurrent_uploads": max_concurrent_uploads,
        "max_concurrent_segments": max_concurrent_segments,
    }
    for name, value in limits.items():
        if value < 1:
            raise UserError(f"{name} must be >= 1, got {value}")
    if max_waiting < 0:
        raise UserError(f"max_waiting must be >= 0, got {max_waiting}")
    decode_slots = asyncio.Semaphore(max_concurrent_decodes)
    uploads = Gate("uploads", max_concurrent_uploads, max_waiting)
    segments = Gate("segment requests", max_concurrent_segments, max_waiting)
    app = FastAPI(
        title="sam3-agent SAM 3 service",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    images = ImageStore(max_stored_images, max_stored_bytes)
    app.state.images = images
    app.state.segmenter = segmenter
    app.state.uploads = uploads
    app.state.segments = segments
    expected = token.encode() if token else None
    json_limit = max_upload_bytes * 4 // 3 + _JSON_OVERHEAD_BYTES

    def authorize(request: Request) -> None:
        if expected is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            raise ServiceError(
                401,
                ErrorCode.UNAUTHORIZED,
                "missing or wrong bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = ErrorCode.NOT_FOUND if exc.status_code == 404 else ErrorCode.INVALID
        return _error_response(
            ServiceError(
                exc.status_code,
                code,
                str(exc.detail),
                headers=dict(exc.headers) if exc.headers else None,
            )
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = json.loads(json.dumps(list(exc.errors()), default=str))
        return _error_response(
            ServiceError(422, ErrorCode.INVALID, "invalid request", details=details)
        )

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error answering %s %s", request.method, request.url.path)
        return _error_response(ServiceError(500, ErrorCode.INTERNAL, "internal server error"))

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    @app.get("/v1/health")
    async def health_with_token(request: Request) -> HealthResponse:
        authorize(request)
        return HealthResponse()

    async def decode(data: bytes) -> tuple[str, RGBImage]:
        async with decode_slots:
            return await run_in_threadpool(_decode_and_id, data, max_pixels)

    @app.post("/v1/images")
    async def upload(request: Request) -> UploadResponse:
        authorize(request)
        mime = request.headers.get("content-type", "").split(";")[0].strip().lower()
        raw = mime == RAW_RGB_MIME
        if raw:
            height, width = _raw_size(dict(request.query_params), max_pixels)
            limit = height * width * 3
        else:
            limit = max_upload_bytes
        refuse_declared_over(request, limit)
        async with uploads.hold():
            data = await read_body(request, limit)
            if raw:
                async with decode_slots:
                    image_id, image = await run_in_threadpool(_raw_and_id, data, height, width)
            else:
                if not data:
                    raise ServiceError(
                        400, ErrorCode.BAD_IMAGE, "the body is empty; send image bytes"
                    )
                image_id, image = await decode(data)
            del data
            images.put(image_id, image)
        logger.info("stored image %s (%dx%d)", image_id[:12], image.shape[1], image.shape[0])
        return UploadResponse(image_id=image_id, image_size=(image.shape[0], image.shape[1]))

    @app.post("/v1/segment")
    async def segment(request: Request) -> SegmentResponse:
        authorize(request)
        refuse_declared_over(request, json_limit)
        declared = declared_length(request)
        # A body that may carry an image is read inside an upload slot, and that slot is
        # kept while its decoded image is worked on. Order: segment slot, then upload slot.
        small = declared is not None and declared <= SMALL_BODY_BYTES
        async with segments.hold(), AsyncExitStack() as held:
            if not small:
                await held.enter_async_context(uploads.hold())
            body = await read_body(request, SMALL_BODY_BYTES if small else json_limit)
            req = _parse_segment_request(body)
            del body
            if req.image_id is not None:
                image_id = req.image_id
                found = images.get(image_id)
                if found is None:
                    raise ServiceError(
                        404,
                        ErrorCode.UNKNOWN_IMAGE,
                        f"unknown image id {image_id}; upload it to /v1/images again",
                    )
                image = found
            else:
                if small:
                    await held.enter_async_context(uploads.hold())
                # The base64 text is dropped once decoded: only the pixels are kept.
                encoded = req.image_base64 or ""
                req = req.model_copy(update={"image_base64": None})
                image_id, image = await _inline_image(encoded)
                del encoded
                images.put(image_id, image)
            return await _segment_image(req, image, image_id)

    def _parse_segment_request(body: bytes) -> SegmentRequest:
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as e:
            # ValueError covers bad JSON, bad UTF-8 and integers past Python's digit limit.
            detail = one_line(e)
            raise ServiceError(
                400, ErrorCode.BAD_JSON, f"the body is not valid JSON: {detail}"
            ) from e
        try:
            req = SegmentRequest.model_validate(payload)
        except ValidationError as e:
            details = json.loads(e.json(include_url=False, include_input=False))
            raise ServiceError(422, ErrorCode.INVALID, "invalid request", details=details) from e
        return req

    async def _segment_image(
        req: SegmentRequest, image: RGBImage, image_id: str
    ) -> SegmentResponse:
        try:
            return await run_in_threadpool(
                _segment_sync,
                segmenter,
                image,
                image_id,
                req.phrases,
                req.score_threshold,
                req.rle_order,
            )
        except UserError as e:
            raise ServiceError(400, ErrorCode.INVALID, str(e)) from e
        except SegmenterError as e:
            logger.error("segmenter failed: %s", e)
            raise ServiceError(503, ErrorCode.SEGMENTER, str(e)) from e

    async def _inline_image(encoded: str) -> tuple[str, RGBImage]:
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ServiceError(400, ErrorCode.BAD_IMAGE, "image_base64 is not valid base64") from e
        if len(data) > max_upload_bytes:
            raise ServiceError(
                413,
                ErrorCode.TOO_LARGE,
                f"image of {len(data)} bytes exceeds the {max_upload_bytes}-byte limit",
            )
        return await decode(data)

    return app
