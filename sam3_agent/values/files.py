"""Writing files safely: safe names, atomic writes, JSON text any UTF-8 writer accepts.

Every path is built from a directory the caller chose plus a name that went through
:func:`safe_name`, so nothing a user or model writes can escape the run directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2

from sam3_agent.values.images import RGBImage

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Escaped in JSON text: lone surrogates (no UTF-8 form) and the line breaks JSON leaves
# raw (U+0085, U+2028, U+2029), which would split a trace.jsonl record for str.splitlines.
_ESCAPED = re.compile("[\ud800-\udfff\x85\u2028\u2029]")
_MAX_DEPTH = 64
"""Nesting kept when a document is too deep for the JSON encoder (see :func:`json_text`)."""


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 for a file. Lone surrogates (``"\\ud83d"`` from a model's reply or a
    user's query) cannot be encoded; they are written as ``\\ud83d`` escapes instead."""
    return text.encode("utf-8", errors="backslashreplace")


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as JSON text that any UTF-8 writer accepts, whatever strings it holds.

    Non-ASCII stays readable; lone surrogates and the Unicode line breaks become ``\\uXXXX``
    escapes (valid JSON that reads back to the same string; one record stays one line). A
    document the encoder refuses (nested deeper than Python's recursion limit, an integer
    too long to print) is written with those values replaced by a short description rather
    than not at all.
    """
    try:
        text = json.dumps(document, indent=indent, ensure_ascii=False)
    except (ValueError, RecursionError, TypeError):
        text = json.dumps(_shallow(document, _MAX_DEPTH), indent=indent, ensure_ascii=False)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _shallow(value: Any, depth: int) -> Any:
    """``value`` with containers below ``depth`` levels and unprintable numbers described."""
    if isinstance(value, dict):
        if depth <= 0:
            return "<nested too deeply to record>"
        return {str(k): _shallow(v, depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return "<nested too deeply to record>"
        return [_shallow(v, depth - 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            str(value)
        except ValueError:
            return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
        return value
    if value is None or isinstance(value, (str, float, bool)):
        return value
    return repr(value)


def safe_name(text: str, *, max_len: int = 64) -> str:
    """A file name made from ``text``: only ``[A-Za-z0-9._-]``, no ``..``, bounded length.

    Different inputs that would collapse to the same name (``"a/b"`` and ``"a b"``) get a
    short hash of the original appended, so names stay distinct.
    """
    cleaned = _UNSAFE.sub("_", text).strip("._-")
    cleaned = re.sub(r"\.{2,}", ".", cleaned) or "x"
    if cleaned != text or len(cleaned) > max_len:
        digest = hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:8]
        cleaned = f"{cleaned[: max(1, max_len - 9)]}-{digest}"
    return cleaned


def _read_umask() -> int:
    # The umask can only be read by setting it; done once, at import, before any thread of
    # ours writes files.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_read_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    The file gets the mode any other new file would (``0o666`` less the umask), not the
    private ``0o600`` of a temporary file.
    """
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


@contextmanager
def atomic_output(path: Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that opens its file by name (a video
    encoder, which picks its container from ``suffix``).

    When the block ends normally the file is flushed to disk, given the mode any other new
    file would get, and renamed to ``path``; when it raises, the file is removed and
    ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, document: Any) -> None:
    """``document`` as indented JSON (see :func:`json_text`), written atomically."""
    atomic_write_bytes(path, (json_text(document, indent=2) + "\n").encode("utf-8"))


def write_png(path: Path, image: RGBImage) -> None:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise OSError(f"could not encode {path.name} as PNG")
    atomic_write_bytes(path, buf.tobytes())
