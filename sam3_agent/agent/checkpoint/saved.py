"""Reading a run directory's committed session (``session.json``, its prompts,
``prompt_set.json``), its lock, and what a resume can check before any model loads."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.state import Fingerprint
from sam3_agent.values.errors import ResumeError, UserError
from sam3_agent.values.images import RGBImage

if TYPE_CHECKING:
    from sam3_agent.values.config import AgentConfig

STATE_FILE = rundir.STATE
FORMAT = 1  # of the session.json this version writes and reads
DAMAGED = (KeyError, TypeError, ValueError, AttributeError)  # read from JSON of the wrong shape


def refusal(directory: Path, why: str) -> ResumeError:
    """The error refusing to resume ``directory`` because of ``why``."""
    return ResumeError(f"cannot resume {directory}: {why}")


@contextmanager
def damaged(directory: Path, name: str = STATE_FILE) -> Iterator[None]:
    """Turn a read of a document of the wrong shape into "``name`` is damaged"."""
    try:
        yield
    except DAMAGED as e:
        raise refusal(directory, f"{name} is damaged: {e!r}") from e


def _flock(file: IO[str]) -> OSError | None:
    """Take an exclusive advisory lock on ``file`` without waiting: None, or the error when
    another process holds it (None too where the platform has no advisory locks)."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        return e
    return None


class DirectoryLock:
    """One session at a time in a run directory: an exclusive advisory lock on
    ``.session.lock`` until :meth:`close` (the system releases it when the process dies)."""

    def __init__(self, directory: Path, *, resuming: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = open(directory / rundir.LOCK, "a")  # noqa: SIM115 - held for the session
        error = _flock(self._file)
        if error is not None:
            self._file.close()
            message = f"{directory} is in use by another running session"
            raise (ResumeError if resuming else UserError)(message) from error

    def close(self) -> None:
        self._file.close()

    @staticmethod
    def held_elsewhere(directory: Path) -> bool:
        """Whether a live session holds ``directory`` now; takes and creates nothing."""
        path = directory / rundir.LOCK
        if not path.is_file():
            return False
        with open(path, "a") as probe:  # closing it lets go of a lock it took
            return _flock(probe) is not None


def load_saved(directory: Path) -> dict[str, Any]:
    """``session.json`` of ``directory``, checked for its format (ResumeError otherwise)."""
    path = directory / STATE_FILE
    if not path.is_file():
        raise ResumeError(f"nothing to resume in {directory}: no {STATE_FILE}")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise refusal(directory, f"{STATE_FILE} is unreadable: {e}") from e
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        found = saved.get("format") if isinstance(saved, dict) else None
        raise refusal(directory, f"{STATE_FILE} has format {found!r}, expected {FORMAT}")
    return saved


@dataclass(frozen=True)
class Committed:
    """What a resumed session continues from: the last committed ``round``; ``ended``: it
    ended or spent its rounds (a resume makes no model call); ``trace_bytes`` then;
    ``prompt_set``: the set it started with, as saved (None: it kept none)."""

    round: int
    ended: bool
    system_prompt: str
    checker_prompt: str
    trace_bytes: int
    fingerprint: Fingerprint
    prompt_set: dict[str, Any] | None = None

    @property
    def backends_recorded(self) -> bool:
        """Whether the session recorded its backends (an older version's cannot be compared)."""
        return self.fingerprint.backends is not None


def read_committed(
    directory: Path, saved: dict[str, Any], now: Fingerprint, *, max_rounds: int | None = None
) -> Committed:
    """Check ``saved`` against the request ``now`` (a ResumeError names every difference) and
    read what it points at; with ``max_rounds``, a session that spent its rounds has ended."""
    with damaged(directory):
        fingerprint = Fingerprint.from_json(saved["fingerprint"])
    differences = fingerprint.differences(now)
    if differences:
        raise refusal(directory, "; ".join(differences))
    with damaged(directory):
        hashes = {name: str(saved["prompts"][name]) for name in ("system", "checker")}
        trace_bytes = int(saved["trace_bytes"])
        round_ = int(saved["state"]["round"])
        ended = saved["state"]["ending"] is not None
    system_prompt = read_prompt(directory, rundir.SYSTEM_PROMPT, hashes["system"])
    checker_prompt = read_prompt(directory, rundir.CHECKER_PROMPT, hashes["checker"])
    prompt_set = saved_prompt_set(directory)
    trace = directory / rundir.TRACE
    size = trace.stat().st_size if trace.is_file() else 0
    if size < trace_bytes:
        raise refusal(
            directory,
            f"{rundir.TRACE} has {size} bytes, the last committed round had written {trace_bytes}",
        )
    return Committed(
        round=round_,
        # A session whose rounds are spent ends at its next start without any call.
        ended=ended or (max_rounds is not None and round_ >= max_rounds),
        system_prompt=system_prompt,
        checker_prompt=checker_prompt,
        trace_bytes=trace_bytes,
        fingerprint=fingerprint,
        prompt_set=prompt_set,
    )


def check_resumable(
    directory: Path,
    *,
    query: str,
    image: RGBImage,
    config: AgentConfig,
    model: str | None = None,
    backends: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> Committed:
    """Check, before any model loads and changing nothing, everything a resume of ``directory``
    can be refused for; ``model`` and ``backends``: what is known of the models yet."""
    saved = load_saved(directory)
    if DirectoryLock.held_elsewhere(directory):
        raise ResumeError(f"{directory} is in use by another running session")
    now = Fingerprint.of(query=query, image=image, config=config, model=model, backends=backends)
    return read_committed(directory, saved, now, max_rounds=config.max_rounds)


def saved_prompt_set(directory: Path) -> dict[str, Any] | None:
    """The prompt set the session started with (``{"name", "path", "sources"}``), or None."""
    path = directory / rundir.PROMPT_SET
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        sources = {str(k): str(v) for k, v in saved["sources"].items()}
        return {"name": str(saved["name"]), "path": str(saved["path"]), "sources": sources}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise refusal(directory, f"{rundir.PROMPT_SET} is damaged: {e!r}") from e


def prompt_sha256(text: str) -> str:
    """The digest ``session.json`` keeps of a prompt file's text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_prompt(directory: Path, name: str, sha256: str) -> str:
    """The prompt file ``name`` of ``directory``; ResumeError when its digest is not ``sha256``."""
    try:
        text = (directory / name).read_bytes().decode()
    except (OSError, UnicodeDecodeError) as e:
        raise refusal(directory, f"cannot read {name}: {e}") from e
    if prompt_sha256(text) != sha256:
        raise refusal(directory, f"{name} changed since the session started")
    return text
