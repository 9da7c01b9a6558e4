"""The FastAPI app of the SAM 3 service: ``/health``, ``/v1/health``, ``/v1/images``,
``/v1/segment`` and ``/v1/videos``; memory is bounded by :class:`ServiceLimits`."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from sam3_agent.apps.service.intake import (
    Gate,
    ServiceError,
    content_type,
    decode_and_id,
    raw_size,
    read_body,
    read_json,
    refuse_declared_over,
    too_large,
)
from sam3_agent.apps.service.limits import DEFAULT_LIMITS, SMALL_BODY_BYTES, ServiceLimits
from sam3_agent.apps.service.video_store import VideoStore
from sam3_agent.apps.service.videos import add_video_routes
from sam3_agent.backends.base import Segmenter, VideoSegmenter, phrase_as_read
from sam3_agent.backends.lru import Lru
from sam3_agent.backends.schemas import (
    ErrorCode,
    HealthResponse,
    PhraseResult,
    SegmentRequest,
    SegmentResponse,
    UploadResponse,
)
from sam3_agent.backends.segment_args import clean_phrase
from sam3_agent.backends.wire import RAW_RGB_MIME, encode_masks
from sam3_agent.values.detections import Exemplars
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.images import RGBImage

logger = logging.getLogger(__name__)

# Masks held at once while answering one segment request, in pixels (bool: bytes).
_MASK_BUDGET_PIXELS = 256_000_000
# A JSON body carries the image as base64 (4/3 of the bytes) plus the phrases.
_JSON_OVERHEAD_BYTES = 64 * 1024


def _segment_sync(
    segmenter: Segmenter, image: RGBImage, image_id: str, req: SegmentRequest
) -> SegmentResponse:
    height, width = int(image.shape[0]), int(image.shape[1])
    embedding = segmenter.embed(image)
    # A few phrases at a time, encoded at once: 32 phrases' full-size masks never coexist.
    step = max(1, _MASK_BUDGET_PIXELS // (height * width * 8))
    results: list[PhraseResult] = []
    phrases = req.phrases
    exemplars = Exemplars.from_json(req.exemplars.model_dump()) if req.exemplars else None
    for start in range(0, len(phrases), step):
        # The in-process backend's sanitiser: the service reads what SAM 3 in-process would.
        cleaned = [clean_phrase(p) for p in phrases[start : start + step]]
        if exemplars:
            detections = embedding.segment(cleaned, req.score_threshold, exemplars)
        else:
            detections = embedding.segment(cleaned, req.score_threshold)
        for text, det in zip(cleaned, detections, strict=True):
            answer = {
                "phrase": text,
                "used_phrase": phrase_as_read(embedding, text),
                "masks": encode_masks(det.masks, req.rle_order),
                "boxes": det.boxes.tolist(),
                "scores": det.scores.tolist(),
            }
            results.append(PhraseResult.model_validate(answer))
    return SegmentResponse(image_id=image_id, image_size=(height, width), results=results)


def create_app(
    segmenter: Segmenter,
    *,
    token: str | None = None,
    limits: ServiceLimits = DEFAULT_LIMITS,
    video_segmenter: VideoSegmenter | None = None,
    video_dir: Path | None = None,
) -> FastAPI:
    """The service app around one thread-safe segmenter (and video segmenter: else the
    video endpoints answer 404); its stores and gates are on ``app.state``."""
    if token is not None and not token:
        raise UserError("the service token must not be empty")
    decode_slots = asyncio.Semaphore(limits.max_concurrent_decodes)
    uploads = Gate("uploads", limits.max_concurrent_uploads, limits.max_waiting)
    segments = Gate("segment requests", limits.max_concurrent_segments, limits.max_waiting)
    tracks = Gate("track requests", limits.max_concurrent_tracks, limits.max_waiting)
    videos = (
        None if video_segmenter is None else VideoStore(limits.max_stored_video_bytes, video_dir)
    )
    images: Lru[str, RGBImage] = Lru(
        limits.max_stored_images, limits.max_stored_bytes, lambda image: image.nbytes
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if videos is not None:
                videos.close()

    app = FastAPI(
        title="sam3-agent SAM 3 service",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.images, app.state.segmenter, app.state.videos = images, segmenter, videos
    app.state.uploads, app.state.segments, app.state.tracks = uploads, segments, tracks
    expected = token.encode() if token else None
    json_limit = limits.max_upload_bytes * 4 // 3 + _JSON_OVERHEAD_BYTES

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
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = ErrorCode.NOT_FOUND if exc.status_code == 404 else ErrorCode.INVALID
        headers = dict(exc.headers) if exc.headers else None
        return ServiceError(exc.status_code, code, str(exc.detail), headers=headers).response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = json.loads(json.dumps(list(exc.errors()), default=str))
        return ServiceError(422, ErrorCode.INVALID, "invalid request", details=details).response()

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error answering %s %s", request.method, request.url.path)
        return ServiceError(500, ErrorCode.INTERNAL, "internal server error").response()

    add_video_routes(app, video_segmenter, videos, limits, uploads, tracks, authorize)

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    @app.get("/v1/health")
    async def health_with_token(request: Request) -> HealthResponse:
        authorize(request)
        return HealthResponse()

    async def keep_image(data: bytes, raw: tuple[int, int] | None) -> tuple[str, RGBImage]:
        """The one intake of an image: decoded in a decode slot, then stored."""
        async with decode_slots:
            image_id, image = await run_in_threadpool(decode_and_id, data, raw, limits.max_pixels)
        images.keep(image_id, image)
        return image_id, image

    @app.post("/v1/images")
    async def upload(request: Request) -> UploadResponse:
        authorize(request)
        raw = None
        if content_type(request) == RAW_RGB_MIME:
            raw = raw_size(dict(request.query_params), limits.max_pixels)
        limit = raw[0] * raw[1] * 3 if raw else limits.max_upload_bytes
        refuse_declared_over(request, limit)
        async with uploads.hold():
            data = await read_body(request, limit)
            if raw is None and not data:
                raise ServiceError(400, ErrorCode.BAD_IMAGE, "the body is empty; send image bytes")
            image_id, image = await keep_image(data, raw)
            del data
        logger.info("stored image %s (%dx%d)", image_id[:12], image.shape[1], image.shape[0])
        return UploadResponse(image_id=image_id, image_size=(image.shape[0], image.shape[1]))

    @app.post("/v1/segment")
    async def segment(request: Request) -> SegmentResponse:
        authorize(request)
        declared = refuse_declared_over(request, json_limit)
        # A body that may carry an image is read inside an upload slot, and that slot is
        # kept while its decoded image is worked on. Order: segment slot, then upload slot.
        small = declared is not None and declared <= SMALL_BODY_BYTES
        async with segments.hold(), AsyncExitStack() as held:
            if not small:
                await held.enter_async_context(uploads.hold())
            req = await read_json(
                request, SMALL_BODY_BYTES if small else json_limit, SegmentRequest
            )
            if (image_id := req.image_id) is not None:
                if (image := images.get(image_id)) is None:
                    message = f"unknown image id {image_id}; upload it to /v1/images again"
                    raise ServiceError(404, ErrorCode.UNKNOWN_IMAGE, message)
            else:
                if small:
                    await held.enter_async_context(uploads.hold())
                # The base64 text is dropped once decoded: only the pixels are kept.
                encoded = req.image_base64 or ""
                req = req.model_copy(update={"image_base64": None})
                try:
                    data = base64.b64decode(encoded, validate=True)
                except (binascii.Error, ValueError) as e:
                    message = "image_base64 is not valid base64"
                    raise ServiceError(400, ErrorCode.BAD_IMAGE, message) from e
                del encoded
                if len(data) > limits.max_upload_bytes:
                    raise too_large(
                        f"image of {len(data)} bytes exceeds the {limits.max_upload_bytes}-byte "
                        "limit"
                    )
                image_id, image = await keep_image(data, None)
                del data
            try:
                return await run_in_threadpool(_segment_sync, segmenter, image, image_id, req)
            except UserError as e:
                raise ServiceError(400, ErrorCode.INVALID, str(e)) from e
            except SegmenterError as e:
                logger.error("segmenter failed: %s", e)
                raise ServiceError(503, ErrorCode.SEGMENTER, str(e)) from e

    return app
