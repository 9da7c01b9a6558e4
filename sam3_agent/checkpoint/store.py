"""The checkpoint of one session in its run directory: start, resume, restore, commit."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent import __version__
from sam3_agent.backends.base import ChatModel, Segmenter
from sam3_agent.checkpoint.journal import (
    JOURNAL_FILE,
    Journal,
    JournaledChatModel,
    JournaledSegmenter,
    read_journal,
)
from sam3_agent.checkpoint.state import (
    Ending,
    Fingerprint,
    SessionState,
    detections_to_json,
)
from sam3_agent.detections import Detections
from sam3_agent.errors import ResumeError, UserError
from sam3_agent.images import EncodedImage, RGBImage
from sam3_agent.outputs import Trace, atomic_write_bytes
from sam3_agent.steps import ActionStep

if TYPE_CHECKING:
    from sam3_agent.config import AgentConfig
    from sam3_agent.session import Session

logger = logging.getLogger(__name__)

STATE_FILE = "session.json"
LOCK_FILE = ".session.lock"
PROMPT_SET_FILE = "prompt_set.json"
SYSTEM_PROMPT_FILE = "system_prompt.txt"
CHECKER_PROMPT_FILE = "checker_prompt.txt"
FORMAT = 1


class ContinuedTrace(Trace):
    """A trace that keeps the records of the committed rounds instead of starting empty.

    Whatever a killed process wrote after its last commit (records of the unfinished round,
    a torn line) is cut off; the resumed round writes its records again.
    """

    def __init__(self, directory: Path, committed_bytes: int) -> None:
        super().__init__(None)  # None: do not create or empty anything
        self.directory = directory
        path = directory / "trace.jsonl"
        size = path.stat().st_size if path.is_file() else 0
        if size < committed_bytes:
            raise ResumeError(
                f"cannot resume {directory}: trace.jsonl has {size} bytes, the last committed "
                f"round had written {committed_bytes}"
            )
        with open(path, "r+b") as f:
            f.truncate(committed_bytes)


class DirectoryLock:
    """One session at a time in a run directory: an exclusive advisory lock on
    ``.session.lock``, held until :meth:`close` (or until the process dies: the system
    releases it, so a killed session never leaves its directory locked).

    Raises:
        UserError: another live process holds the directory (``ResumeError`` when resuming).
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


class Checkpoint:
    """The committed state of one session in its run directory (see the module docstring).

    Build it with :meth:`start` (a new session), :meth:`resume` (continue one) or
    :meth:`disabled` (no output directory). The session's prompts are :attr:`system_prompt`
    and :attr:`checker_prompt`; its trace is :attr:`trace`.
    """

    def __init__(
        self,
        directory: Path | None,
        *,
        trace: Trace,
        system_prompt: str,
        checker_prompt: str,
        fingerprint: Fingerprint | None,
        saved: dict[str, Any] | None = None,
        lock: DirectoryLock | None = None,
    ) -> None:
        self.directory = directory
        self._lock = lock
        self.trace = trace
        self.system_prompt = system_prompt
        self.checker_prompt = checker_prompt
        self.fingerprint = fingerprint
        self._saved = saved
        committed = int(saved["state"]["round"]) if saved else 0
        self._journal: Journal | None = None
        # The current masks often stay the same for several rounds: encode them once.
        self._encoded: tuple[Detections, dict[str, Any] | None] | None = None
        if directory is not None:
            replay = read_journal(directory / JOURNAL_FILE) if saved else []
            self._journal = Journal(directory / JOURNAL_FILE, committed + 1, replay)
            if not saved:
                self._journal.reset(committed + 1)

    # -- construction ----------------------------------------------------------------

    @classmethod
    def disabled(cls, *, system_prompt: str, checker_prompt: str) -> Checkpoint:
        return cls(
            None,
            trace=Trace(None),
            system_prompt=system_prompt,
            checker_prompt=checker_prompt,
            fingerprint=None,
        )

    @classmethod
    def start(
        cls,
        directory: Path,
        fingerprint: Fingerprint,
        *,
        system_prompt: str,
        checker_prompt: str,
        prompt_set: dict[str, Any] | None = None,
    ) -> Checkpoint:
        """A new session in ``directory``: an empty trace, the prompts saved, round 0 committed.

        ``prompt_set`` (``{"name", "path", "sources"}``: every template's text) is kept in
        ``prompt_set.json``, so a resumed session renders with the set it started with.

        Raises:
            UserError: another running session uses ``directory``.
        """
        lock = DirectoryLock(directory, resuming=False)
        try:
            # An earlier session's state must not describe this directory's new trace.
            (directory / STATE_FILE).unlink(missing_ok=True)
            trace = Trace(directory)
            trace.save_text(SYSTEM_PROMPT_FILE, system_prompt)
            trace.save_text(CHECKER_PROMPT_FILE, checker_prompt)
            if prompt_set is not None:
                text = json.dumps(prompt_set, indent=1) + "\n"
                atomic_write_bytes(directory / PROMPT_SET_FILE, text.encode("ascii"))
            checkpoint = cls(
                directory,
                trace=trace,
                system_prompt=system_prompt,
                checker_prompt=checker_prompt,
                fingerprint=fingerprint,
                lock=lock,
            )
            checkpoint._write(SessionState())
        except BaseException:
            lock.close()
            raise
        return checkpoint

    @classmethod
    def resume(cls, directory: Path, fingerprint: Fingerprint) -> Checkpoint:
        """Continue the session saved in ``directory``.

        Raises:
            ResumeError: nothing to resume there, unreadable files, another process running
                the session, or ``fingerprint`` (the image, query and settings given now)
                differs from the session's.
        """
        load_saved(directory)  # nothing to resume: say so before creating a lock file
        lock = DirectoryLock(directory, resuming=True)
        try:
            return cls._resume_locked(directory, fingerprint, lock)
        except BaseException:
            lock.close()
            raise

    @classmethod
    def _resume_locked(
        cls, directory: Path, fingerprint: Fingerprint, lock: DirectoryLock
    ) -> Checkpoint:
        saved = load_saved(directory)
        check_fingerprint(directory, saved, fingerprint)
        try:
            hashes = {name: str(saved["prompts"][name]) for name in ("system", "checker")}
            trace_bytes = int(saved["trace_bytes"])
            int(saved["state"]["round"])
        except (KeyError, TypeError, ValueError) as e:
            raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e
        system_prompt = _read_prompt(directory, SYSTEM_PROMPT_FILE, hashes["system"])
        checker_prompt = _read_prompt(directory, CHECKER_PROMPT_FILE, hashes["checker"])
        trace = ContinuedTrace(directory, trace_bytes)
        checkpoint = cls(
            directory,
            trace=trace,
            system_prompt=system_prompt,
            checker_prompt=checker_prompt,
            fingerprint=fingerprint,
            saved=saved,
            lock=lock,
        )
        journal = checkpoint._journal
        logger.info(
            "resuming %s after round %s (%d journaled results to replay)",
            directory,
            saved["state"]["round"],
            journal.replayable if journal else 0,
        )
        return checkpoint

    def close(self) -> None:
        """Let another process use the run directory (the session is over here)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # -- the backends, journaled -----------------------------------------------------

    def chat_model(self, inner: ChatModel) -> ChatModel:
        return inner if self._journal is None else JournaledChatModel(inner, self._journal)

    def segmenter(self, inner: Segmenter) -> Segmenter:
        return inner if self._journal is None else JournaledSegmenter(inner, self._journal)

    # -- the loop's two calls --------------------------------------------------------

    def restore(self, session: Session) -> SessionState:
        """Put the committed state into ``session``; the state (empty for a new session)."""
        if self._saved is None or self.directory is None:
            return SessionState()
        h, w = session.image.shape[:2]
        try:
            state = SessionState.from_json(
                self._saved["state"], load_image=self._load_image, image_size=(h, w)
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ResumeError(
                f"cannot resume {self.directory}: {STATE_FILE} is damaged: {e!r}"
            ) from e
        session.round = state.round
        session.phrases = list(state.phrases)
        session.current = state.current
        session.checks_used = state.checks_used
        session.usage = state.usage
        for phase, seconds in state.timings.items():
            session.timings[phase] += seconds
        return state

    def commit(
        self,
        session: Session,
        steps: Sequence[ActionStep],
        corrections: int,
        ending: Ending | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        """Commit the state after the round ``session.round`` (atomic; then a new journal).

        ``context`` is the context policy's state after the round (JSON-ready), restored
        with the rest on resume."""
        if self.directory is None:
            return
        state = SessionState(
            round=session.round,
            corrections=corrections,
            steps=list(steps),
            phrases=list(session.phrases),
            current=session.current,
            checks_used=session.checks_used,
            usage=session.usage,
            timings=dict(session.timings),
            ending=ending,
            context=context,
        )
        self._write(state)
        if self._journal is not None:
            self._journal.reset(session.round + 1)

    # -- files -----------------------------------------------------------------------

    def _write(self, state: SessionState) -> None:
        if self.directory is None or self.fingerprint is None:
            return
        trace_path = self.directory / "trace.jsonl"
        # The trace is appended without syncing; sync it before the state that points past it.
        with open(trace_path, "rb+") as f:
            os.fsync(f.fileno())
            trace_bytes = f.seek(0, os.SEEK_END)
        document = {
            "format": FORMAT,
            "version": __version__,
            "fingerprint": self.fingerprint.to_json(),
            "prompts": {
                "system": _sha256(self.system_prompt),
                "checker": _sha256(self.checker_prompt),
            },
            "trace_bytes": trace_bytes,
            "state": state.to_json(self.trace.save_image, self._encode_masks),
        }
        # ASCII JSON: any string a model or user wrote (lone surrogates too) reads back as is.
        text = json.dumps(document, indent=1) + "\n"
        atomic_write_bytes(self.directory / STATE_FILE, text.encode("ascii"))

    def _encode_masks(self, detections: Detections | None) -> dict[str, Any] | None:
        if detections is None:
            return None
        if self._encoded is None or self._encoded[0] is not detections:
            self._encoded = (detections, detections_to_json(detections))
        return self._encoded[1]

    def _load_image(self, doc: dict[str, Any]) -> EncodedImage:
        directory = self.directory or Path(".")  # only called while resuming a directory
        path = _inside(directory, str(doc["file"]))
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ResumeError(f"cannot resume {directory}: {doc['file']}: {e}") from e
        image = EncodedImage(
            name=str(doc["name"]),
            data=data,
            mime=doc["mime"],
            width=int(doc["width"]),
            height=int(doc["height"]),
        )
        if image.sha256 != doc["sha256"]:
            raise ResumeError(
                f"cannot resume {directory}: {doc['file']} changed since it was saved"
            )
        return image


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _inside(directory: Path, relative: str) -> Path:
    try:
        path = (directory / relative).resolve()
    except (OSError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: bad file name {relative!r}") from e
    if not path.is_relative_to(directory.resolve()):
        raise ResumeError(f"cannot resume {directory}: {relative!r} is outside the run directory")
    return path


def _read_prompt(directory: Path, name: str, sha256: str) -> str:
    try:
        text = (directory / name).read_bytes().decode()
    except (OSError, UnicodeDecodeError) as e:
        raise ResumeError(f"cannot resume {directory}: cannot read {name}: {e}") from e
    if _sha256(text) != sha256:
        raise ResumeError(f"cannot resume {directory}: {name} changed since the session started")
    return text


def load_saved(directory: Path) -> dict[str, Any]:
    """``session.json`` of ``directory``, read and checked for its format.

    Raises:
        ResumeError: no such file (nothing to resume), unreadable, or another format.
    """
    path = directory / STATE_FILE
    if not path.is_file():
        raise ResumeError(f"nothing to resume in {directory}: no {STATE_FILE}")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is unreadable: {e}") from e
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        found = saved.get("format") if isinstance(saved, dict) else None
        raise ResumeError(
            f"cannot resume {directory}: {STATE_FILE} has format {found!r}, expected {FORMAT}"
        )
    return saved


def check_fingerprint(
    directory: Path, saved: dict[str, Any], now: Fingerprint, *, compare_model: bool = True
) -> None:
    """Raise :class:`ResumeError` naming every difference between the session and ``now``."""
    try:
        before = Fingerprint.from_json(saved["fingerprint"])
    except (KeyError, TypeError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e
    differences = before.differences(now, compare_model=compare_model)
    if differences:
        raise ResumeError(f"cannot resume {directory}: " + "; ".join(differences))


def check_resumable(directory: Path, *, query: str, image: RGBImage, config: AgentConfig) -> int:
    """Check, before any model loads, that ``directory`` holds a session this request continues.

    The MLLM's name is compared later, when the model is built. Returns the last committed
    round.

    Raises:
        ResumeError: nothing to resume, damaged files, or a different image, query or settings.
    """
    saved = load_saved(directory)
    now = Fingerprint.of(query=query, image=image, config=config, model="")
    check_fingerprint(directory, saved, now, compare_model=False)
    try:
        return int(saved["state"]["round"])
    except (KeyError, TypeError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e


def saved_prompt_set(directory: Path) -> dict[str, Any] | None:
    """The prompt set a session in ``directory`` started with (``{"name", "path",
    "sources"}``), or None when it kept none.

    Raises:
        ResumeError: the file is there but unreadable or damaged.
    """
    path = directory / PROMPT_SET_FILE
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        sources = {str(k): str(v) for k, v in saved["sources"].items()}
        return {"name": str(saved["name"]), "path": str(saved["path"]), "sources": sources}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ResumeError(f"cannot resume {directory}: {PROMPT_SET_FILE} is damaged: {e!r}") from e
