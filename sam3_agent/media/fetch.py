"""Images and videos named by an ``http(s)://`` URL, fetched once per URL into a directory the
caller owns: streamed to a bounded size, with connect/read timeouts and at most
:data:`MAX_REDIRECTS` redirects, each followed only to http(s); the type read from the bytes,
never from the name or the ``Content-Type``. Every failure is a one-line
:class:`~sam3_agent.values.errors.DownloadError` showing the URL as plain text."""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urljoin, urlsplit

from sam3_agent.values.errors import DownloadError
from sam3_agent.values.text import one_line, visible

Kind = Literal["image", "video"]

DEFAULT_MAX_DOWNLOAD_MB = 500
MAX_REDIRECTS = 5
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0  # between two reads of the body, not for the whole download
_CHUNK = 1 << 16

# A scheme of two letters or more, so a Windows drive (``C:/``) is a path.
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]+):(/*)", re.IGNORECASE)
_IMAGE_FORMATS = {"JPEG": ".jpg", "MPO": ".jpg", "PNG": ".png", "WEBP": ".webp", "BMP": ".bmp",
                  "TIFF": ".tif", "GIF": ".gif"}  # fmt: skip


def url_of(source: object) -> str | None:
    """``source`` as typed when it names a URL of any scheme (``data:`` included), else None.
    A ``Path`` keeps one slash of ``//``; the URL comes back with two."""
    if not isinstance(source, (str, Path)):
        return None
    text = str(source)
    match = _SCHEME.match(text)
    if match is None or not (match.group(2) or match.group(1).lower() == "data"):
        return None
    if isinstance(source, Path) and match.group(2) == "/":
        return f"{match.group(1)}://{text[match.end() :]}"
    return text


def shown(url: str) -> str:
    """``url`` safe to print: control bytes as ``\\xNN``, a password replaced, bounded."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            url = parts._replace(netloc=netloc).geturl()
    except ValueError:
        pass
    # Every unprintable character escaped (line breaks included): the URL stays one line.
    escaped = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in url)
    return visible(escaped, 300)


def check_url(url: str) -> None:
    """Refuse, in one line, a URL whose scheme is not http or https."""
    scheme = url.split(":", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise DownloadError(
            f"{shown(url)}: only http:// and https:// URLs are fetched, not {visible(scheme)}:"
        )
    try:
        host = urlsplit(url).hostname
    except ValueError as e:
        raise DownloadError(f"{shown(url)}: not a valid URL ({one_line(e)})") from e
    if not host:
        raise DownloadError(f"{shown(url)}: the URL names no host")


@dataclass(frozen=True)
class Download:
    """A URL fetched: the local ``path`` (a suffix of its type), its SHA-256 and size."""

    url: str
    path: Path
    sha256: str
    size: int

    @property
    def stem(self) -> str:
        """The URL's last path segment without its suffix (``photo`` of ``.../photo.jpg``)."""
        return _stem(self.url)

    def record(self) -> dict[str, Any]:
        """What ``result.json`` says of the input: where it was found and what it held."""
        return {"path": self.url, "url": self.url, "sha256": self.sha256}


class Downloads:
    """The downloads of one run, into ``directory``, each URL fetched at most once."""

    def __init__(
        self, directory: Path, max_mb: int = DEFAULT_MAX_DOWNLOAD_MB, *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S, read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:  # fmt: skip
        if max_mb < 1:
            raise DownloadError(f"`max_download_mb` must be >= 1, got {max_mb}")
        self.directory, self.max_bytes = directory, max_mb * 1024 * 1024
        self.timeouts = (connect_timeout_s, read_timeout_s)
        self._done: dict[str, Download] = {}

    def fetch(self, url: str, kind: Kind) -> Download:
        """``url``'s body, checked to be a ``kind``, as a local file (a cached one when
        this run fetched it already)."""
        check_url(url)
        if url not in self._done:
            self._done[url] = self._fetch(url, kind)
        return self._done[url]

    def resolve(self, source: Any, kind: Kind) -> tuple[Any, Download | None]:
        """``source`` itself when it is no URL, else the downloaded file and its record."""
        url = url_of(source)
        if url is None:
            return source, None
        download = self.fetch(url, kind)
        return download.path, download

    def _fetch(self, url: str, kind: Kind) -> Download:
        import httpx  # here, as cv2 (values.files): the CLI's flags read this module's default

        from sam3_agent.values.files import safe_name

        target = self.directory / f"{len(self._done):04d}-{safe_name(_stem(url), max_len=48)}"
        timeout = httpx.Timeout(self.timeouts[1], connect=self.timeouts[0])
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as client:
                digest, size = self._stream(client, url, target)
        except BaseException as e:
            target.unlink(missing_ok=True)
            if isinstance(e, httpx.TimeoutException):
                raise DownloadError(f"{shown(url)}: timed out ({type(e).__name__})") from e
            if isinstance(e, httpx.HTTPError | httpx.InvalidURL):  # InvalidURL: no HTTPError
                raise DownloadError(f"{shown(url)}: cannot fetch: {one_line(e)}") from e
            raise
        suffix = _type_of(target, kind)
        if suffix is None:
            target.unlink(missing_ok=True)
            raise DownloadError(f"{shown(url)}: the bytes fetched are not {_KIND_SAID[kind]}")
        path = target.with_name(target.name + suffix)
        target.replace(path)
        return Download(url, path, digest, size)

    def _stream(self, client: Any, url: str, target: Path) -> tuple[str, int]:
        at = url
        for _ in range(MAX_REDIRECTS + 1):
            with client.stream("GET", at) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    at = urljoin(at, location)
                    if not at.lower().startswith(("http://", "https://")):
                        raise DownloadError(
                            f"{shown(url)}: redirected to {shown(at)}, which is not http(s)"
                        )
                    continue
                if response.status_code != 200:
                    said = f"HTTP {response.status_code} {visible(response.reason_phrase, 80)}"
                    raise DownloadError(f"{shown(url)}: {said.strip()}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise DownloadError(f"{shown(url)}: {int(declared)} bytes, {self._over()}")
                digest, size = hashlib.sha256(), 0
                self.directory.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as f:
                    for chunk in response.iter_bytes(_CHUNK):
                        size += len(chunk)
                        if size > self.max_bytes:
                            raise DownloadError(f"{shown(url)}: {self._over()}")
                        digest.update(chunk)
                        f.write(chunk)
                return digest.hexdigest(), size
        raise DownloadError(f"{shown(url)}: more than {MAX_REDIRECTS} redirects")

    def _over(self) -> str:
        return f"over the limit of {self.max_bytes // (1024 * 1024)} MB (`max_download_mb`)"


@contextmanager
def downloads(max_mb: int = DEFAULT_MAX_DOWNLOAD_MB) -> Iterator[Downloads]:
    """A run's :class:`Downloads` in a temporary directory, removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="sam3-agent-downloads-") as directory:
        yield Downloads(Path(directory), max_mb)


_KIND_SAID = {"image": "an image (JPEG, PNG, WebP, BMP, TIFF or GIF)",
              "video": "a video (MP4, MOV, WebM, MKV or AVI)"}  # fmt: skip


def _stem(url: str) -> str:
    try:
        return Path(unquote(urlsplit(url).path)).stem or "download"
    except ValueError:
        return "download"


def _type_of(path: Path, kind: Kind) -> str | None:
    """The file suffix of ``path``'s contents when they are a ``kind``, read from its bytes."""
    if kind == "video":
        with path.open("rb") as f:
            head = f.read(12)
        if head[4:8] == b"ftyp":
            return ".mov" if head[8:10] == b"qt" else ".mp4"
        if head[:4] == b"\x1a\x45\xdf\xa3":
            return ".mkv"  # WebM is Matroska; FFmpeg reads both under either name
        if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
            return ".avi"
        return None
    from PIL import Image

    try:
        with Image.open(path) as image:
            return _IMAGE_FORMATS.get(str(image.format))
    except Exception:  # PIL raises many kinds for bytes that are no image
        return None
