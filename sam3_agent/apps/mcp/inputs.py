"""What a tool call names as its input: a local path, an ``http(s)://`` URL or, for images,
base64 data; every failure is a one-line :class:`~sam3_agent.values.errors.UserError`."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.media.fetch import Downloads, Kind
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.images import RGBImage, load_image

BASE64_NAME = "(base64 data)"
"""What ``result.json`` names as the image of a call that sent it inline."""


@dataclass(frozen=True)
class Source:
    """An input ready for a session: ``local`` (a file), its name in ``result.json``, its
    run directory's stem and, for a URL, the download's record."""

    local: Path
    shown_as: str
    stem: str
    downloaded: dict[str, Any] | None = None


def decode_base64(text: str, max_bytes: int) -> bytes:
    """The bytes of base64 ``text`` (a ``data:...;base64,`` prefix allowed), at most
    ``max_bytes``."""
    if text[:5].lower() == "data:":
        header, comma, text = text.partition(",")
        if not comma or not header.lower().endswith(";base64"):
            raise UserError("image_base64: a data: URL must be data:<type>;base64,<data>")
    data = "".join(text.split())
    if not data:
        raise UserError("image_base64 holds no data")
    if len(data) // 4 * 3 > max_bytes:
        raise UserError(
            f"image_base64 decodes to more than {max_bytes // (1024 * 1024)} MB "
            "(`--max-download-mb`)"
        )
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise UserError(f"image_base64 is not valid base64 data ({e})") from e


def resolve(fetched: Downloads, path_or_url: str | None, data: str | None, kind: Kind) -> Source:
    """The one input of a call: ``path_or_url`` or base64 ``data`` (images only)."""
    if (path_or_url is None) == (data is None):
        given = "image or image_base64" if kind == "image" else "video"
        raise UserError(f"give exactly one of {given}")
    if data is not None:
        inline = fetched.directory / "inline-image"
        inline.write_bytes(decode_base64(data, fetched.max_bytes))
        return Source(inline, BASE64_NAME, "base64")
    if not path_or_url or not path_or_url.strip():
        raise UserError(f"the {kind} path is empty")
    local, download = fetched.resolve(path_or_url, kind)
    if download is None:
        path = Path(local).expanduser()
        return Source(path, str(path), path.stem)
    return Source(download.path, download.url, download.stem, download.record())


def pixels_of(source: Source, max_pixels: int) -> RGBImage:
    """The image of ``source``; errors name it as ``shown_as``, not the server's file."""
    try:
        return load_image(source.local, max_pixels=max_pixels)
    except ImageLoadError as e:
        raise ImageLoadError(str(e).replace(str(source.local), source.shown_as)) from e
