"""Loading user images and encoding the images we send to the MLLM.

Every image that enters a conversation is an :class:`EncodedImage`: encoded once (JPEG by
default), hashed once, and shared by reference, so no round re-reads or re-encodes it.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from sam3_agent.errors import ImageLoadError

RGBImage = npt.NDArray[np.uint8]
"""An ``(H, W, 3)`` uint8 RGB image."""

ImageInput = str | Path | Image.Image | np.ndarray
"""What the public API accepts as an image: a path, a PIL image, or an ``(H, W, 3)`` array."""

# Refuse decompression bombs (a few KB of PNG that inflate to gigabytes) with a clear error.
MAX_PIXELS = 16_000 * 16_000


def load_image(image: ImageInput) -> RGBImage:
    """Return ``image`` as a C-contiguous ``(H, W, 3)`` uint8 RGB array.

    Raises:
        ImageLoadError: missing path, unreadable or corrupt file, wrong array shape.
    """
    if isinstance(image, (str, Path)):
        path = Path(image)
        if not path.exists():
            raise ImageLoadError(f"image not found: {path}")
        if not path.is_file():
            raise ImageLoadError(f"not a file: {path}")
        try:
            with Image.open(path) as pil:
                if pil.width * pil.height > MAX_PIXELS:
                    raise ImageLoadError(
                        f"image too large: {pil.width}x{pil.height} pixels in {path}"
                    )
                pil.load()
                return _pil_to_rgb(pil)
        except ImageLoadError:
            raise
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            raise ImageLoadError(f"cannot read image {path}: {e}") from e
    if isinstance(image, Image.Image):
        return _pil_to_rgb(image)
    if isinstance(image, np.ndarray):
        arr = image
        if arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)
        if arr.ndim != 3 or arr.shape[2] not in (3, 4):
            raise ImageLoadError(f"image array must be (H, W, 3) RGB, got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise ImageLoadError(f"image array must be uint8, got dtype {arr.dtype}")
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ImageLoadError(f"image array is empty: shape {arr.shape}")
        return np.ascontiguousarray(arr[:, :, :3])
    kind = type(image).__name__
    raise ImageLoadError(f"unsupported image type {kind}; pass a path, PIL image or array")


def _pil_to_rgb(pil: Image.Image) -> RGBImage:
    if pil.mode != "RGB":
        pil = pil.convert("RGB")
    return np.ascontiguousarray(np.asarray(pil, dtype=np.uint8))


def image_digest(image: RGBImage) -> str:
    """A content hash of the pixels (and shape), stable across processes."""
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
    """An image ready to be sent: encoded bytes plus what a backend or trace needs.

    ``name`` is a file name (made safe by the creator) used when a trace writes the bytes.
    """

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
        bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        if fmt == "jpeg":
            ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
            mime: Literal["image/jpeg", "image/png"] = "image/jpeg"
            ext = ".jpg"
        else:
            ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            mime, ext = "image/png", ".png"
        if not ok:
            raise ImageLoadError(f"could not encode image {name} as {fmt}")
        h, w = image.shape[:2]
        return cls(name=name + ext, data=buf.tobytes(), mime=mime, width=w, height=h)

    # The derived forms backends need are computed on first use and kept with the image, so
    # an image sent in many rounds (the raw photo, every round) is converted once.

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
