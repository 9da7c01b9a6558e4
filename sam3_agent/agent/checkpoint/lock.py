"""``.session.lock``: one live session at a time in a run directory."""

from __future__ import annotations

from pathlib import Path

from sam3_agent.agent import rundir
from sam3_agent.values.errors import ResumeError, UserError

LOCK_FILE = rundir.LOCK


class DirectoryLock:
    """One session at a time in a run directory: an exclusive advisory lock on
    ``.session.lock``, held until :meth:`close` (or until the process dies: the system
    releases it, so a killed session never leaves its directory locked).
    """

    def __init__(self, directory: Path, *, resuming: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = open(directory / LOCK_FILE, "a")  # noqa: SIM115 - held for the session
        try:
            import fcntl
        except ImportError:  # no advisory locks on this platform: nothing to hold
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._file.close()
            message = f"{directory} is in use by another running session"
            raise (ResumeError if resuming else UserError)(message) from e

    def close(self) -> None:
        self._file.close()

    @staticmethod
    def held_elsewhere(directory: Path) -> bool:
        """Whether a live session holds ``directory`` now (its lock file exists and cannot
        be taken); takes nothing and creates nothing."""
        path = directory / LOCK_FILE
        if not path.is_file():
            return False
        try:
            import fcntl
        except ImportError:
            return False
        with open(path, "a") as probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
        return False
