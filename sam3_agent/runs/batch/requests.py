"""The requests of a batch (a JSONL or CSV file of image and video rows, or a folder of images
with one query); a problem of the file is a ``DatasetError`` naming file and line."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from sam3_agent.media.fetch import Downloads, check_url, url_of
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import DatasetError, UserError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
MAX_ID_LENGTH = 200
ID_DIGEST_CHARS = 12

FRAME_KEYS: dict[str, str] = {
    "stride": "stride",
    "max_frames": "max_frames",
    "start": "start_s",
    "end": "end_s",
    "fps": "fps",
}
"""A video row's optional keys, and the :class:`FrameSelection` field each one sets."""
_WHOLE_NUMBERS = ("stride", "max_frames")


@dataclass(frozen=True)
class BatchRequest:
    """One (image or video, query) pair: ``id`` unique and stable across reruns; ``image_path``
    absolute (a video's file or frame folder); ``frames`` set for a video."""

    id: str
    image_path: Path
    query: str
    frames: FrameSelection | None = None
    url: str | None = None
    """The http(s) URL the row named; ``image_path`` is its download once fetched."""
    downloaded: dict[str, Any] | None = dataclasses.field(default=None, compare=False)
    """What ``result.json`` says of the download (``Download.record()``)."""
    unavailable: str | None = None
    """Why the URL could not be fetched: the request fails with it."""

    @property
    def media(self) -> Literal["image", "video"]:
        return "image" if self.frames is None else "video"


def default_id(image: Path | str, query: str, frames: FrameSelection | None = None) -> str:
    """``<file name>:<query>`` (``clip.mp4[stride=2]:<query>`` for a video tracking not every
    frame; a URL whole); over :data:`MAX_ID_LENGTH` characters, its start, ``…`` and 12 hex
    digits of the whole's SHA-256."""
    name = image if isinstance(image, str) else image.name
    default = FrameSelection()
    if frames is not None and frames != default:
        given = [
            f"{key}={_number(getattr(frames, field))}"
            for key, field in FRAME_KEYS.items()
            if getattr(frames, field) != getattr(default, field)
        ]
        name += "[" + ",".join(given) + "]"
    full = f"{name}:{query}"
    if len(full) <= MAX_ID_LENGTH:
        return full
    # surrogatepass: a lone surrogate (valid in a JSON string) must not make the id fail.
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{full[: MAX_ID_LENGTH - ID_DIGEST_CHARS - 1]}…{digest[:ID_DIGEST_CHARS]}"


def _number(value: float | int) -> str:
    """``2``, ``1.5``: a frame setting as an id shows it (whole floats as ints)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_requests(
    source: Path, *, query: str | None = None, frames: FrameSelection | None = None
) -> list[BatchRequest]:
    """The requests of ``source`` in input order: a ``.jsonl`` or ``.csv`` file (``image`` or
    ``video``, ``query``, optional ``id`` and :data:`FRAME_KEYS`; paths relative to the file),
    or a folder of images each asked ``query``; a row's frame keys replace ``frames``'."""
    if source.is_dir():
        if query is None or not query.strip():
            raise UserError(f"{source} is a folder of images: give the query with `query='TEXT'`")
        requests = _folder(source, query)
    elif source.is_file():
        if query is not None:
            raise UserError(
                f"`query` applies to a folder of images; {source} names its own queries"
            )
        read = {".jsonl": _jsonl, ".csv": _csv}.get(source.suffix.lower())
        if read is None:
            raise UserError(f"{source}: batch input must be a .jsonl or .csv file, or a folder")
        requests = read(source, frames or FrameSelection())
    else:
        raise UserError(f"batch input {source} does not exist")
    if not requests:
        raise DatasetError(f"{source} holds no requests")
    seen: set[str] = set()
    for request in requests:
        if request.id in seen:
            raise DatasetError(
                f"{source}: the id {request.id!r} is used twice; ids must be unique "
                "(same image and query twice? give each row its own 'id')"
            )
        seen.add(request.id)
    return requests


def _folder(folder: Path, query: str) -> list[BatchRequest]:
    images = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    )
    return [BatchRequest(id=p.name, image_path=p.absolute(), query=query.strip()) for p in images]


def _jsonl(path: Path, frames: FrameSelection) -> list[BatchRequest]:
    requests = []
    # "\n" only: str.splitlines() would also cut at U+2028, U+0085 and others that a JSON
    # string may hold unescaped.
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{number}: not a JSON object: {e.msg}") from e
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        requests.append(_request(path, number, row, frames))
    return requests


def _csv(path: Path, frames: FrameSelection) -> list[BatchRequest]:
    # newline="": a quoted field may hold line breaks (and U+2028 is no line break in CSV).
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
    columns = set(reader.fieldnames or ())
    if "query" not in columns or not columns & {"image", "video"}:
        raise DatasetError(
            f"{path}: the header must name the columns image and query (or video and "
            f"query; optionally id), got {sorted(columns)}"
        )
    try:
        # An empty cell is an absent key: a mixed file leaves "image" empty on a video's row.
        return [
            _request(path, reader.line_num, {k: v for k, v in row.items() if v != ""}, frames)
            for row in reader
        ]
    except csv.Error as e:
        raise DatasetError(f"{path}: malformed CSV: {e}") from e


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"cannot read {path}: {e}") from e


def _request(path: Path, number: int, row: dict[str, Any], frames: FrameSelection) -> BatchRequest:
    where = f"{path}:{number}"
    query, given_id = row.get("query"), row.get("id")
    video = row.get("video")
    key = "image" if video is None else "video"
    if video is not None and row.get("image") is not None:
        raise DatasetError(f"{where}: name an 'image' or a 'video', not both")
    media = row.get(key)
    if not isinstance(media, str) or not media.strip():
        raise DatasetError(f"{where}: '{key}' must be a non-empty path")
    if not isinstance(query, str) or not query.strip():
        raise DatasetError(f"{where}: 'query' must be non-empty text")
    chosen = _frames(where, row, frames) if key == "video" else None
    if key == "image":
        given = [k for k in FRAME_KEYS if row.get(k) is not None]
        if given:
            raise DatasetError(f"{where}: '{given[0]}' applies to a video; this row is an image")
    url = url_of(media.strip())
    if url is not None:
        try:
            check_url(url)
        except UserError as e:
            raise DatasetError(f"{where}: {e}") from e
        image_path = Path()  # its download, once fetched (fetch_urls)
    else:
        image_path = Path(media.strip()).expanduser()
        if not image_path.is_absolute():
            image_path = path.parent / image_path
        # Absolute: Ray workers do not share the driver's working directory.
        image_path = image_path.absolute()
    if given_id is None or given_id == "":
        request_id = default_id(url or image_path, query.strip(), chosen)
    elif isinstance(given_id, (str, int)) and not isinstance(given_id, bool):
        request_id = str(given_id).strip()
    else:
        raise DatasetError(f"{where}: 'id' must be text or a number")
    if not request_id or len(request_id) > MAX_ID_LENGTH:
        raise DatasetError(
            f"{where}: 'id' must be 1..{MAX_ID_LENGTH} characters, got {len(request_id)}"
        )
    return BatchRequest(
        id=request_id, image_path=image_path, query=query.strip(), frames=chosen, url=url
    )


def fetch_urls(requests: list[BatchRequest], downloads: Downloads) -> list[BatchRequest]:
    """``requests`` with each URL row's ``image_path`` its download (each URL fetched once); a
    URL that cannot be fetched fails its rows (``unavailable``)."""
    fetched: list[BatchRequest] = []
    failed: dict[str, UserError] = {}
    for request in requests:
        if request.url is None:
            fetched.append(request)
            continue
        try:
            if request.url in failed:
                raise failed[request.url]
            got = downloads.fetch(request.url, request.media)
        except UserError as e:
            failed[request.url] = e
            fetched.append(replace(request, unavailable=str(e)))
            continue
        fetched.append(replace(request, image_path=got.path, downloaded=got.record()))
    return fetched


def _frames(where: str, row: dict[str, Any], default: FrameSelection) -> FrameSelection:
    """The frames a video row asks for: ``default`` with the row's own keys, each checked."""
    chosen: dict[str, Any] = {}
    for key, field in FRAME_KEYS.items():
        value = row.get(key)
        if value is None:
            continue
        number = _parse_number(value, whole=key in _WHOLE_NUMBERS)
        if number is None:
            kind = "a whole number" if key in _WHOLE_NUMBERS else "a number"
            raise DatasetError(f"{where}: '{key}' must be {kind}, got {value!r}")
        low_ok = number >= 1 if key in _WHOLE_NUMBERS else number >= 0
        if not low_ok or (key == "fps" and number <= 0):
            bound = ">= 1" if key in _WHOLE_NUMBERS else "> 0" if key == "fps" else ">= 0"
            raise DatasetError(f"{where}: '{key}' must be {bound}, got {value!r}")
        chosen[field] = number
    start = chosen.get("start_s", default.start_s)
    end = chosen.get("end_s", default.end_s)
    if start is not None and end is not None and end <= start:
        raise DatasetError(f"{where}: 'end' ({end}) must be after 'start' ({start})")
    return replace(default, **chosen)


def _parse_number(value: Any, *, whole: bool) -> float | int | None:
    """A JSON number or the text of one (CSV cells are text); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip()) if whole else float(value.strip())
        except ValueError:
            return None
    if whole:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return value if isinstance(value, int) else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None
