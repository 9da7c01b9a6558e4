"""The run directory of one request: checked before models load, never mixed with old files
(``overwrite`` removes only a previous run's own files), a fresh ``runs/<time>-<name>`` by
default, and none left behind by a request that stopped before its session started."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.store import DirectoryLock
from sam3_agent.agent.loop import STOPPED
from sam3_agent.backends.spec import check_writable_dir
from sam3_agent.values.errors import UserError

DEFAULT_ROOT = Path("runs")
MAX_SUFFIX = 1000


class Interrupted(KeyboardInterrupt):
    """Ctrl+C after the session started: its message says where the finished rounds are
    kept and how to continue them."""


@dataclass(frozen=True)
class Output:
    """Where one request writes: ``out`` (None: a fresh one under :data:`DEFAULT_ROOT`), or
    ``resume``, an interrupted session's directory continued in place."""

    out: Path | None = None
    resume: Path | None = None
    overwrite: bool = False

    def check(self, *, agent: bool) -> None:
        """Refuse what cannot be written, before anything loads."""
        if self.resume is not None:  # the directory holds the session: not cleared, not claimed
            if self.out is not None and self.out.resolve() != self.resume.resolve():
                raise UserError("`resume` continues the session in its own directory; drop `out`")
            if not agent:
                raise UserError("`resume` continues an agent session; not with `mode='sam3-only'`")
        elif self.out is not None:
            check_run_dir(self.out, overwrite=self.overwrite)

    @contextlib.contextmanager
    def claimed(self, default_name: str) -> Iterator[Path]:
        """The directory the block runs the session in (resumed, ``out`` cleared, or a fresh one
        named after ``default_name``). Stopped before the session started, the (empty)
        directories made for it are removed; Ctrl+C after that raises :class:`Interrupted`."""
        made = [] if self.resume is not None else _absent(self.out or DEFAULT_ROOT)
        if self.resume is not None:
            path = self.resume
        elif self.out is None:
            path = claim_default_run_dir(default_name)
            made.insert(0, path)
        else:
            clear_run_dir(self.out)
            path = self.out
        try:
            yield path
        except BaseException as e:
            if not (path / rundir.STATE).is_file():
                for directory in made:
                    with contextlib.suppress(OSError):
                        directory.rmdir()  # an empty directory only
                raise
            if isinstance(e, KeyboardInterrupt):
                raise Interrupted(
                    f"the finished rounds are kept in {path}; continue with the same command "
                    f"and `resume` {path}"
                ) from None
            raise


def check_run_dir(out: Path, *, overwrite: bool) -> None:
    """Refuse ``out`` before anything loads: a file, unwritable, or not empty."""
    check_writable_dir(out, "`out`")
    entries = _entries(out)
    if not entries:
        return
    if not overwrite:
        if rundir.STATE in entries and not _finished(out):
            raise UserError(
                f"`out` {out} holds an interrupted session; continue it with `resume` {out} "
                "(its finished rounds are kept), or pass `overwrite` to start over"
            )
        raise UserError(
            f"`out` {out} is not empty; pass `overwrite` to replace the previous run's files, "
            "or choose another directory"
        )
    if DirectoryLock.held_elsewhere(out):
        raise UserError(
            f"`out` {out} is in use by a running session; wait for it to end or choose "
            "another directory"
        )
    if not any(name in entries for name in rundir.MARKERS):
        raise UserError(
            f"`overwrite` replaces a previous run's files, but {out} does not hold a run "
            "(no result.json or trace.jsonl); choose another directory"
        )
    foreign = sorted(entries - rundir.ENTRIES)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(
            f"`out` {out} holds files no run writes ({shown}); `overwrite` removes only a "
            "run's own files: move them or choose another directory"
        )


def clear_run_dir(out: Path) -> None:
    """Remove a previous run's files from ``out``, but the lock: a session that started meanwhile
    still holds it, and the new one then fails to take it instead of writing beside it."""
    for name in sorted(_entries(out) & rundir.ENTRIES - {rundir.LOCK}):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def claim_default_run_dir(name: str, root: Path = DEFAULT_ROOT) -> Path:
    """Create ``root/<time>-<name>`` (``name`` a safe file name), or the first free ``-N``
    variant: creating it is the claim, so two processes in one second get two directories."""
    check_writable_dir(root, "the default output directory")
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"
    for n in range(1, MAX_SUFFIX + 1):
        candidate = root / (stem if n == 1 else f"{stem}-{n}")
        try:
            candidate.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            continue
        except OSError as e:
            raise UserError(f"cannot create the output directory {candidate}: {e}") from e
        return candidate
    raise UserError(f"{MAX_SUFFIX} runs named {stem} exist in {root}; pass `out=DIR`")


def _finished(out: Path) -> bool:
    """Whether ``out`` holds the result of a session that ended (not one stopped by Ctrl+C)."""
    try:
        failure = json.loads((out / rundir.RESULT).read_text(encoding="utf-8")).get("failure")
    except (OSError, ValueError, AttributeError):
        return (out / rundir.RESULT).exists()  # there, but unreadable: not ours to judge
    return bool(failure != STOPPED)


def _absent(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, innermost first."""
    path = path.expanduser()
    return [p for p in (path, *path.parents) if not p.exists()]


def _entries(out: Path) -> set[str]:
    path = out.expanduser()
    if not path.is_dir():
        return set()
    return {entry.name for entry in path.iterdir()}
