"""Checks of paths the user names, before anything is written there (light: the CLI runs
them before any model library is imported)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sam3_agent.values.errors import UserError


def check_cache_file(path: Path) -> None:
    """The response cache must be a file (or creatable as one)."""
    resolved = path.expanduser()
    if resolved.is_dir():
        raise UserError(f"`cache` {path} is a directory; give a file, e.g. {path}/responses.sqlite")
    if not resolved.exists():
        check_writable_dir(resolved.parent, "`cache`")


def check_writable_dir(path: Path, flag: str) -> None:
    """``path`` is a directory we may write into, or can be created as one."""
    resolved = path.expanduser()
    probe = resolved
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is" if probe == resolved else f"is under {probe}, which is"
        raise UserError(f"{flag} {path} {where} a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {probe} is not writable")
    try:  # what access() allows, a file system can still refuse (/proc, read-only mounts)
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot create files in {probe} ({e.strerror})") from e
