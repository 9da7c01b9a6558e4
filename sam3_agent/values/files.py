"""Writing files safely: safe names (nothing a user or model writes escapes the run
directory), atomic writes, JSON text any UTF-8 writer accepts."""

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
_MAX_DEPTH = 64  # nesting kept when a document is too deep for the JSON encoder


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 for a file. Lone surrogates (``"\\ud83d"`` from a model's reply or a
    user's query) cannot be encoded; they are written as ``\\ud83d`` escapes instead."""
    return text.encode("utf-8", errors="backslashreplace")


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as JSON text any UTF-8 writer accepts (one record stays one line). A
    document the encoder refuses (too deep, an integer too long to print) is written with
    those values described rather than not at all."""
    try:
        text = json.dumps(document, indent=indent, ensure_ascii=False)
    except (ValueError, RecursionError, TypeError):
        text = json.dumps(_shallow(document, _MAX_DEPTH), indent=indent, ensure_ascii=False)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _shallow(value: Any, depth: int) -> Any:
    if isinstance(value, (dict, list, tuple)) and depth <= 0:
        return "<nested too deeply to record>"
    if isinstance(value, dict):
        return {str(k): _shallow(v, depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
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
    """A file name made from ``text``: only ``[A-Za-z0-9._-]``, no ``..``, bounded length; a
    changed name gets a short hash of the original, so ``"a/b"`` and ``"a b"`` stay distinct."""
    cleaned = _UNSAFE.sub("_", text).strip("._-")
    cleaned = re.sub(r"\.{2,}", ".", cleaned) or "x"
    if cleaned != text or len(cleaned) > max_len:
        digest = hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:8]
        cleaned = f"{cleaned[: max(1, max_len - 9)]}-{digest}"
    return cleaned


# The umask can only be read by setting it: done once, at import, before any thread of ours
# writes files.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


@contextmanager
def atomic_output(path: Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that opens its file by name; on success
    it is fsynced, given the mode any new file gets (not mkstemp's ``0o600``) and renamed to
    ``path``; on error removed."""
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
    atomic_write_bytes(path, (json_text(document, indent=2) + "\n").encode("utf-8"))


def write_png(path: Path, image: RGBImage) -> None:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise OSError(f"could not encode {path.name} as PNG")
    atomic_write_bytes(path, buf.tobytes())
