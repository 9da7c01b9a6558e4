"""The one loader for every image that enters the project, and :class:`EncodedImage`, the
encoded-once, hashed-once form every image in a conversation is shared as."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps, UnidentifiedImageError

from sam3_agent.values.config import DEFAULT_MAX_PIXELS
from sam3_agent.values.errors import ImageLoadError
from sam3_agent.values.text import one_line

RGBImage = npt.NDArray[np.uint8]  # (H, W, 3) uint8 RGB

ImageInput = str | Path | bytes | Image.Image | np.ndarray

BACKGROUND = (255, 255, 255)  # under transparent pixels, as most viewers show them

_EXIF_ORIENTATION = 0x0112
_TRANSPARENT_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})

_URL = re.compile(r"^(https?):/+", re.IGNORECASE)


def load_image(
    image: ImageInput, *, max_pixels: int = DEFAULT_MAX_PIXELS, exif_orientation: bool = True
) -> RGBImage:
    """``image`` as a C-contiguous ``(H, W, 3)`` uint8 RGB array, as displayed (EXIF
    orientation applied unless ``exif_orientation`` is False), or a one-line ImageLoadError.
    Over ``max_pixels`` is refused from the header, before decoding. 16-bit data maps onto
    0..255 (PIL ``I``/``F`` beyond it: stretched min..max), transparency is composited onto
    :data:`BACKGROUND`; arrays: uint8, bool, uint16 or float in [0, 1]."""
    if max_pixels < 1:
        raise ImageLoadError(f"max_pixels must be >= 1, got {max_pixels}")
    if isinstance(image, (str, Path)):
        refuse_url(image, "images")
        path = Path(image)
        if not path.exists():
            raise ImageLoadError(f"image not found: {path}")
        if not path.is_file():
            raise ImageLoadError(f"not a file: {path}")
        return _load_file(path, str(path), max_pixels, exif_orientation)
    if isinstance(image, (bytes, bytearray, memoryview)):
        if not image:
            raise ImageLoadError("cannot read image: no bytes")
        return _load_file(io.BytesIO(bytes(image)), "the image", max_pixels, exif_orientation)
    if isinstance(image, Image.Image):
        _check_pixels(image.width, image.height, max_pixels, "the PIL image")
        try:
            return _pil_to_rgb(image, exif_orientation)
        except (OSError, SyntaxError, ValueError, TypeError) as e:
            raise ImageLoadError(f"cannot convert the PIL image: {one_line(e)}") from e
    if isinstance(image, np.ndarray):
        return _array_to_rgb(image, max_pixels)
    raise ImageLoadError(
        f"unsupported image type {type(image).__name__}; "
        "pass a path, image bytes, a PIL image or an array"
    )


def refuse_url(source: str | Path, what: str, error: type[ImageLoadError] = ImageLoadError) -> None:
    """Raise ``error`` for an http(s) URL, shown as typed (a Path keeps one slash of ``//``)."""
    url = _URL.match(str(source))
    if url:
        shown = f"{url.group(1)}://{str(source)[url.end() :]}"
        raise error(f"{shown} is a URL; {what} are read from files: download it first")


def image_size_as_displayed(path: Path, *, exif_orientation: bool = True) -> tuple[int, int]:
    """``(height, width)`` of the image at ``path`` from its header, orientation applied."""
    try:
        with _pil_bomb_check_off(), Image.open(path) as pil:
            width, height = pil.size
            if exif_orientation and _orientation(pil) in (5, 6, 7, 8):
                width, height = height, width
            return int(height), int(width)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ImageLoadError(f"cannot read image {path}: {one_line(e)}") from e


def _load_file(
    source: Path | io.BytesIO, name: str, max_pixels: int, exif_orientation: bool
) -> RGBImage:
    try:
        with _pil_bomb_check_off(), Image.open(source) as opened:
            _check_pixels(opened.width, opened.height, max_pixels, name)
            opened.load()
            return _pil_to_rgb(opened, exif_orientation)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, TypeError) as e:
        raise ImageLoadError(f"cannot read image {name}: {one_line(e)}") from e


_bomb_lock = threading.Lock()
_bomb_users = 0
_bomb_saved: int | None = None


@contextmanager
def _pil_bomb_check_off() -> Iterator[None]:
    """PIL's global ``Image.MAX_IMAGE_PIXELS`` off while any of our decodes runs (ours is
    ``max_pixels``), so concurrent decodes never serialise on it."""
    global _bomb_users, _bomb_saved
    with _bomb_lock:
        if _bomb_users == 0:
            _bomb_saved = Image.MAX_IMAGE_PIXELS
            Image.MAX_IMAGE_PIXELS = None
        _bomb_users += 1
    try:
        yield
    finally:
        with _bomb_lock:
            _bomb_users -= 1
            if _bomb_users == 0:
                Image.MAX_IMAGE_PIXELS = _bomb_saved


class ImageTooLargeError(ImageLoadError):
    """More pixels than the limit allows (read from the header)."""


def _check_pixels(width: int, height: int, max_pixels: int, name: str) -> None:
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"image too large: {name} is {width}x{height} = {width * height} pixels, over the "
            f"limit of {max_pixels} (raise it with `max_image_pixels`)"
        )
    if width < 1 or height < 1:
        raise ImageLoadError(f"image {name} has no pixels ({width}x{height})")


def _orientation(pil: Image.Image) -> int | None:
    try:
        value = pil.getexif().get(_EXIF_ORIENTATION)
    except (OSError, SyntaxError, ValueError, TypeError):
        return None  # broken EXIF: show the pixels as stored, as viewers do
    return value if isinstance(value, int) else None


def _pil_to_rgb(pil: Image.Image, exif_orientation: bool) -> RGBImage:
    if exif_orientation and _orientation(pil) not in (None, 1):
        pil = ImageOps.exif_transpose(pil)  # a copy: the caller's image stays as is
    mode = pil.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        return _array_to_rgb(np.asarray(pil), None, from_pil=True)
    if mode in _TRANSPARENT_MODES or "transparency" in pil.info:
        return _composite(np.asarray(pil.convert("RGBA"), dtype=np.uint8))
    if mode != "RGB":
        try:
            pil = pil.convert("RGB")
        except ValueError as e:
            raise ImageLoadError(f"cannot convert an image of mode {mode} to RGB") from e
    return np.ascontiguousarray(np.asarray(pil, dtype=np.uint8))


def _composite(rgba: npt.NDArray[np.uint8]) -> RGBImage:
    """RGBA over :data:`BACKGROUND`, in uint16 arithmetic one row band at a time."""
    out = np.empty((*rgba.shape[:2], 3), dtype=np.uint8)
    background = np.asarray(BACKGROUND, dtype=np.uint16)
    band = max(1, 4_000_000 // max(1, rgba.shape[1]))  # bound the temporaries
    for top in range(0, rgba.shape[0], band):
        part = rgba[top : top + band]
        alpha = part[:, :, 3:4].astype(np.uint16)
        mixed = part[:, :, :3] * alpha + background * (255 - alpha) + 127
        out[top : top + band] = mixed // 255
    return out


def _array_to_rgb(arr: np.ndarray, max_pixels: int | None, *, from_pil: bool = False) -> RGBImage:
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise ImageLoadError(
            f"image array must be (H, W), (H, W, 3) RGB or (H, W, 4) RGBA, got shape {arr.shape}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ImageLoadError(f"image array is empty: shape {arr.shape}")
    if max_pixels is not None:
        _check_pixels(int(arr.shape[1]), int(arr.shape[0]), max_pixels, "the array")
    arr = _to_uint8(arr, from_pil=from_pil)
    if arr.ndim == 2:
        return np.ascontiguousarray(np.repeat(arr[:, :, None], 3, axis=2))
    if arr.shape[2] == 4:
        return _composite(arr)
    return np.ascontiguousarray(arr)


def _to_uint8(arr: np.ndarray, *, from_pil: bool) -> npt.NDArray[np.uint8]:
    """``from_pil``: a PIL ``I;16*``, ``I`` or ``F`` image (range known only from the data);
    user arrays get the strict rules."""
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.bool_:
        return arr.astype(np.uint8) * np.uint8(255)
    if arr.dtype.kind in "ui" and (arr.dtype == np.uint16 or from_pil):
        lo, hi = int(arr.min()), int(arr.max())
        if lo >= 0 and hi <= 65535:  # 0..65535 onto 0..255, rounded (65535 / 257 = 255)
            return ((arr.astype(np.uint32) + 128) // 257).astype(np.uint8)
        return _stretch(arr, lo, hi)
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise ImageLoadError("image holds NaN or infinite values")
        lo_f, hi_f = float(arr.min()), float(arr.max())
        if lo_f >= 0.0 and hi_f <= 1.0:
            return np.rint(arr * 255.0).astype(np.uint8)
        if from_pil:
            return _stretch(arr, lo_f, hi_f)
        raise ImageLoadError(
            f"float image arrays must hold values in [0, 1], got {lo_f:g}..{hi_f:g}"
        )
    raise ImageLoadError(
        f"image array dtype {arr.dtype} is not supported; use uint8, uint16, bool or float"
    )


def _stretch(arr: np.ndarray, lo: float, hi: float) -> npt.NDArray[np.uint8]:
    """Minimum..maximum onto 0..255; a constant image becomes black."""
    if hi <= lo:
        return np.zeros(arr.shape, dtype=np.uint8)
    scaled = (arr.astype(np.float64) - lo) * (255.0 / (hi - lo))
    return np.rint(scaled).astype(np.uint8)


def image_digest(image: RGBImage) -> str:
    """A content hash of the pixels and shape, stable across processes."""
    h = hashlib.sha256()
    h.update(np.asarray(image.shape, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


def downscale(image: RGBImage, max_side: int) -> RGBImage:
    """Shrink ``image`` so its longer side is at most ``max_side`` (never enlarges)."""
    h, w = image.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1.0:
        return image
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.ascontiguousarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA))


@dataclass(frozen=True)
class EncodedImage:
    """An image ready to be sent; ``name``: a file name made safe by the creator."""

    name: str
    data: bytes
    mime: Literal["image/jpeg", "image/png"]
    width: int
    height: int
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())

    @classmethod
    def encode(
        cls, image: RGBImage, name: str, *, fmt: Literal["jpeg", "png"] = "jpeg", quality: int = 90
    ) -> EncodedImage:
        """Encode an RGB array once. ``name`` gets the matching extension appended."""
        jpeg = fmt == "jpeg"
        ext = ".jpg" if jpeg else ".png"
        params = (
            [cv2.IMWRITE_JPEG_QUALITY, int(quality)] if jpeg else [cv2.IMWRITE_PNG_COMPRESSION, 1]
        )
        ok, buf = cv2.imencode(ext, cv2.cvtColor(image, cv2.COLOR_RGB2BGR), params)
        mime: Literal["image/jpeg", "image/png"] = "image/jpeg" if jpeg else "image/png"
        if not ok:
            raise ImageLoadError(f"could not encode image {name} as {fmt}")
        h, w = image.shape[:2]
        return cls(name=name + ext, data=buf.tobytes(), mime=mime, width=w, height=h)

    @cached_property
    def _data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    @cached_property
    def _pil(self) -> Image.Image:
        with Image.open(io.BytesIO(self.data)) as pil:
            return pil.convert("RGB")

    def data_url(self) -> str:
        """``data:<mime>;base64,...``, base64-encoded once per image."""
        return self._data_url

    def to_pil(self) -> Image.Image:
        """The decoded RGB image, decoded once per image and shared: do not modify it."""
        return self._pil
