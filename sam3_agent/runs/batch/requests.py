"""The requests of a batch: a JSONL or CSV file, or a folder of images with one query.

Every file from outside goes through :func:`load_requests`, which turns every problem of the
file itself into a :class:`~sam3_agent.values.errors.DatasetError` naming the file and line,
before any model loads. Images are not opened here, nor checked to exist: an image that is
missing (or deleted before a resume), unreadable or too large fails its own request where the
work runs, never the batch.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.values.errors import DatasetError, UserError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
MAX_ID_LENGTH = 200
ID_DIGEST_CHARS = 12


@dataclass(frozen=True)
class BatchRequest:
    """One (image, query) pair of a batch.

    Attributes:
        id: unique in the batch and stable across reruns (the key of the results store and
            the name of the request's output directory, made safe).
        image_path: the image file, absolute.
        query: what to segment.
    """

    id: str
    image_path: Path
    query: str


def default_id(image: Path, query: str) -> str:
    """``<image file name>:<query>``: readable and unchanged when the input is reordered.

    At most :data:`MAX_ID_LENGTH` characters: a longer one (a ReasonSeg-style question) keeps
    its start, then ``…`` and the first 12 hex digits of the SHA-256 of the whole, so it stays
    unique and the same on every run (a resume finds it).
    """
    full = f"{image.name}:{query}"
    if len(full) <= MAX_ID_LENGTH:
        return full
    # surrogatepass: a lone surrogate (valid in a JSON string) must not make the id fail.
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{full[: MAX_ID_LENGTH - ID_DIGEST_CHARS - 1]}…{digest[:ID_DIGEST_CHARS]}"


def load_requests(source: Path, *, query: str | None = None) -> list[BatchRequest]:
    """The requests of ``source``, in input order.

    Args:
        source: a ``.jsonl`` file (one object per line: ``image``, ``query``, optional
            ``id``; without one, :func:`default_id`), a ``.csv`` file (a header naming those
            columns), or a folder of images (each image with ``query``; its id is its file
            name). Relative image paths in a file are relative to the file's folder.
        query: the query for every image of a folder (only with a folder).

    Raises:
        UserError: a file with ``query``, or a folder without it.
        DatasetError: unreadable or malformed input, a repeated id.
    """
    if source.is_dir():
        if query is None or not query.strip():
            raise UserError(f"{source} is a folder of images: give the query with --query TEXT")
        requests = _folder(source, query)
    elif source.is_file():
        if query is not None:
            raise UserError(
                f"--query applies to a folder of images; {source} names its own queries"
            )
        suffix = source.suffix.lower()
        if suffix == ".jsonl":
            requests = _jsonl(source)
        elif suffix == ".csv":
            requests = _csv(source)
        else:
            raise UserError(f"{source}: batch input must be a .jsonl or .csv file, or a folder")
    else:
        raise UserError(f"batch input {source} does not exist")
    if not requests:
        raise DatasetError(f"{source} holds no requests")
    _check_unique(source, requests)
    return requests


def _folder(folder: Path, query: str) -> list[BatchRequest]:
    images = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    )
    return [BatchRequest(id=p.name, image_path=p.absolute(), query=query.strip()) for p in images]


def _jsonl(path: Path) -> list[BatchRequest]:
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
        requests.append(_request(path, number, row))
    return requests


def _csv(path: Path) -> list[BatchRequest]:
    # newline="": a quoted field may hold line breaks (and U+2028 is no line break in CSV).
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
    columns = set(reader.fieldnames or ())
    if not {"image", "query"} <= columns:
        raise DatasetError(
            f"{path}: the header must name the columns image and query (and optionally id), "
            f"got {sorted(columns)}"
        )
    try:
        return [_request(path, reader.line_num, row) for row in reader]
    except csv.Error as e:
        raise DatasetError(f"{path}: malformed CSV: {e}") from e


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"cannot read {path}: {e}") from e


def _request(path: Path, number: int, row: dict[str, Any]) -> BatchRequest:
    where = f"{path}:{number}"
    image, query, given_id = row.get("image"), row.get("query"), row.get("id")
    if not isinstance(image, str) or not image.strip():
        raise DatasetError(f"{where}: 'image' must be a non-empty path")
    if not isinstance(query, str) or not query.strip():
        raise DatasetError(f"{where}: 'query' must be non-empty text")
    image_path = Path(image.strip()).expanduser()
    if not image_path.is_absolute():
        image_path = path.parent / image_path
    # Absolute: Ray workers do not share the driver's working directory.
    image_path = image_path.absolute()
    if given_id is None or given_id == "":
        request_id = default_id(image_path, query.strip())
    elif isinstance(given_id, (str, int)) and not isinstance(given_id, bool):
        request_id = str(given_id).strip()
    else:
        raise DatasetError(f"{where}: 'id' must be text or a number")
    if not request_id or len(request_id) > MAX_ID_LENGTH:
        raise DatasetError(
            f"{where}: 'id' must be 1..{MAX_ID_LENGTH} characters, got {len(request_id)}"
        )
    return BatchRequest(id=request_id, image_path=image_path, query=query.strip())


def _check_unique(source: Path, requests: list[BatchRequest]) -> None:
    seen: set[str] = set()
    for request in requests:
        if request.id in seen:
            raise DatasetError(
                f"{source}: the id {request.id!r} is used twice; ids must be unique "
                "(same image and query twice? give each row its own 'id')"
            )
        seen.add(request.id)
