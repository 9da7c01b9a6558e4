"""What a request brings in, under bounds (bodies, images, slots), and the one error type
answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from sam3_agent.apps.service.limits import RETRY_AFTER_S
from sam3_agent.backends.schemas import ErrorCode
from sam3_agent.backends.wire import RAW_RGB_MIME, decode_raw
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.images import ImageTooLargeError, RGBImage, image_digest, load_image
from sam3_agent.values.text import one_line

V = TypeVar("V")
_Request = TypeVar("_Request", bound=BaseModel)


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
        self.status, self.code, self.message = status, code, message
        self.details, self.headers = details, headers

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.message, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def too_large(message: str) -> ServiceError:
    """The 413 ``too_large`` answer, for any body, image or video over a limit."""
    return ServiceError(413, ErrorCode.TOO_LARGE, message)


class Gate:
    """At most ``slots`` holders and ``max_waiting`` more waiting, in arrival order; past
    that :meth:`hold` answers 503 with ``Retry-After`` at once (on the server's loop)."""

    def __init__(self, what: str, slots: int, max_waiting: int) -> None:
        self.what, self.slots, self.max_waiting = what, slots, max_waiting
        self.held = self.waiting = self.peak = self.refused = 0
        self._semaphore = asyncio.Semaphore(slots)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
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


def decode_and_id(
    data: bytes, raw: tuple[int, int] | None, max_pixels: int
) -> tuple[str, RGBImage]:
    """An image's id and pixels: ``raw`` ``(height, width)`` RGB bytes, or a file as
    displayed (413 over ``max_pixels``, read from the header before decoding)."""
    if raw is not None:
        try:
            image = decode_raw(data, *raw)
        except ValueError as e:
            raise ServiceError(400, ErrorCode.BAD_IMAGE, str(e)) from e
        return image_digest(image), image
    try:
        image = load_image(data, max_pixels=max_pixels)
    except ImageTooLargeError as e:
        raise too_large(f"refused: {e}") from e
    except (ImageLoadError, UserError) as e:
        raise ServiceError(
            400, ErrorCode.BAD_IMAGE, f"the body is not a readable image: {e}"
        ) from e
    return image_digest(image), image


def raw_size(query: dict[str, str], max_pixels: int) -> tuple[int, int]:
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
        raise too_large(
            f"image has {width}x{height} = {width * height} pixels; "
            f"this server accepts at most {max_pixels}"
        )
    return height, width


def refuse_declared_over(request: Request, limit: int) -> int | None:
    """413 when the declared ``Content-Length`` exceeds ``limit``; that length, or None."""
    text = request.headers.get("content-length", "").strip()
    declared = int(text) if text.isdigit() else None
    if declared is not None and declared > limit:
        raise too_large(f"body of {declared} bytes exceeds the {limit}-byte limit")
    return declared


async def body_chunks(request: Request, limit: int, what: str = "body") -> AsyncIterator[bytes]:
    """The request body as it arrives, 413 as soon as it exceeds ``limit`` bytes."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(f"{what} exceeds the {limit}-byte limit")
        yield chunk


async def read_body(request: Request, limit: int) -> bytes:
    return b"".join([chunk async for chunk in body_chunks(request, limit)])


def content_type(request: Request) -> str:
    """The body's media type, lower case, without parameters."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_json(request: Request, limit: int, model: type[_Request]) -> _Request:
    """The body (at most ``limit`` bytes) as ``model``: 400 not JSON, 422 not valid."""
    body = await read_body(request, limit)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as e:
        # ValueError covers bad JSON, bad UTF-8 and integers past Python's digit limit.
        raise ServiceError(
            400, ErrorCode.BAD_JSON, f"the body is not valid JSON: {one_line(e)}"
        ) from e
    try:
        return model.model_validate(payload)
    except ValidationError as e:
        details = json.loads(e.json(include_url=False, include_input=False))
        raise ServiceError(422, ErrorCode.INVALID, "invalid request", details=details) from e
