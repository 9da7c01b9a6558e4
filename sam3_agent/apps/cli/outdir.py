"""The output directory of ``run``: checked before models load, never mixed with old files.

* ``--out DIR`` that holds anything is refused unless ``--overwrite``; with it, the files a
  previous run wrote (:data:`sam3_agent.agent.rundir.ENTRIES`, images and videos alike) are
  removed first, and a directory holding anything else is refused rather than emptied.
* Without ``--out``, each run claims a fresh ``runs/<time>-<image>-<query>`` directory by
  creating it; a run in the same second gets a ``-2``, ``-3``... suffix.
* A run that stops before its session started (a backend down, Ctrl+C while the models
  load) leaves no directory it made behind; Ctrl+C after says how to continue
  (:func:`session_dir`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import typer

from sam3_agent.apps.cli.console import EXIT_INTERRUPTED, say
from sam3_agent.backends.spec import check_writable_dir
from sam3_agent.values.errors import UserError

DEFAULT_ROOT = Path("runs")
MAX_SUFFIX = 1000


def check_out_flags(out: Path | None, *, resume: Path | None, overwrite: bool, agent: bool) -> None:
    """``--out``, ``--overwrite`` and ``--resume`` of ``run`` together, before anything loads.

    Raises:
        UserError: ``--resume`` with another ``--out`` or without the agent, or a bad ``--out``.
    """
    if resume is not None:  # the directory holds the session: not cleared, not claimed
        if out is not None and out.resolve() != resume.resolve():
            raise UserError("--resume continues the session in its own directory; drop --out")
        if not agent:
            raise UserError("--resume continues an agent session; not with --mode sam3-only")
    elif out is not None:
        check_run_dir(out, overwrite=overwrite)


@contextlib.contextmanager
def session_dir(out: Path | None, *, resume: Path | None, default_name: str) -> Iterator[Path]:
    """:func:`take_run_dir`'s directory, for the block that runs the session there.

    Stopped before the session started (no ``session.json``), the directories made for it
    are removed again (only while empty: one the user made stays); Ctrl+C after that says
    how to continue the session (exit 130)."""
    if resume is not None:
        made: list[Path] = []
    elif out is not None:
        made = _absent(out)
    else:
        made = _absent(DEFAULT_ROOT)
    path = take_run_dir(out, resume=resume, default_name=default_name)
    if out is None and resume is None:
        made.insert(0, path)
    try:
        yield path
    except BaseException as e:
        if not (path / "session.json").is_file():
            for directory in made:
                with contextlib.suppress(OSError):
                    directory.rmdir()  # an empty directory only
            raise
        if isinstance(e, KeyboardInterrupt):
            say(("interrupted", "yellow"), f": the finished rounds are kept in {path}; continue "
                f"with the same command and --resume {path}")  # fmt: skip
            raise typer.Exit(EXIT_INTERRUPTED) from None
        raise


def take_run_dir(out: Path | None, *, resume: Path | None, default_name: str) -> Path:
    """The directory ``run`` writes to: the resumed one, ``--out`` cleared of a previous
    run's files, or a fresh default one (:func:`claim_default_run_dir`)."""
    if resume is not None:
        return resume
    if out is None:
        return claim_default_run_dir(default_name)
    clear_run_dir(out)
    return out


def check_run_dir(out: Path, *, overwrite: bool) -> None:
    """Refuse ``--out`` before anything loads: a file, unwritable, or not empty.

    Raises:
        UserError: one line that says what to do instead.
    """
    # rundir (numpy, OpenCV) loads here, not with the module: --help stays light.
    from sam3_agent.agent import rundir

    check_writable_dir(out, "--out")
    entries = _entries(out)
    if not entries:
        return
    if not overwrite:
        if rundir.STATE in entries and not _finished(out):
            raise UserError(
                f"--out {out} holds an interrupted session; continue it with --resume {out} "
                "(its finished rounds are kept), or pass --overwrite to start over"
            )
        raise UserError(
            f"--out {out} is not empty; pass --overwrite to replace the previous run's files, "
            "or choose another directory"
        )
    from sam3_agent.agent.checkpoint.store import DirectoryLock

    if DirectoryLock.held_elsewhere(out):
        raise UserError(
            f"--out {out} is in use by a running session; wait for it to end or choose "
            "another directory"
        )
    if not any(name in entries for name in rundir.MARKERS):
        raise UserError(
            f"--overwrite replaces a previous run's files, but {out} does not hold a run "
            "(no result.json or trace.jsonl); choose another directory"
        )
    foreign = sorted(entries - rundir.ENTRIES)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UserError(
            f"--out {out} holds files no run writes ({shown}); --overwrite removes only a "
            "run's own files: move them or choose another directory"
        )


def clear_run_dir(out: Path) -> None:
    """Remove a previous run's files from ``out`` (checked by :func:`check_run_dir`). The
    lock file stays: a session that started meanwhile still holds it, and the new one then
    fails to take it instead of writing beside it."""
    from sam3_agent.agent import rundir

    for name in sorted(_entries(out) & rundir.ENTRIES - {rundir.LOCK}):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def claim_default_run_dir(name: str, root: Path = DEFAULT_ROOT) -> Path:
    """Create and return ``root/<time>-<name>``, or the first free ``-N`` variant.

    ``name`` must already be a safe file name. Creating the directory is the claim, so two
    processes started in the same second get different directories.

    Raises:
        UserError: ``root`` cannot be written, or every variant is taken.
    """
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
    raise UserError(f"{MAX_SUFFIX} runs named {stem} exist in {root}; pass --out DIR")


def _finished(out: Path) -> bool:
    """Whether ``out`` holds the result of a session that ended (not one stopped by Ctrl+C,
    whose result says so)."""
    from sam3_agent.agent import rundir

    try:
        failure = json.loads((out / rundir.RESULT).read_text(encoding="utf-8")).get("failure")
    except (OSError, ValueError, AttributeError):
        return (out / rundir.RESULT).exists()  # there, but unreadable: not ours to judge
    from sam3_agent.agent.loop import STOPPED

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
