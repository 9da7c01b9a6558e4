"""The checkpoint of one session in its run directory: start, resume, restore, commit."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.journal import (
    JOURNAL_FILE,
    Journal,
    JournaledChatModel,
    JournaledSegmenter,
    JournaledVideoSegmenter,
    read_journal,
)
from sam3_agent.agent.checkpoint.saved import (
    FORMAT,
    STATE_FILE,
    DirectoryLock,
    damaged,
    load_saved,
    prompt_sha256,
    read_committed,
    refusal,
)
from sam3_agent.agent.checkpoint.state import Fingerprint, SessionState, detections_to_json
from sam3_agent.agent.prompts import PromptSet
from sam3_agent.agent.steps import Answer
from sam3_agent.agent.trace import Trace
from sam3_agent.backends.base import ChatModel, Segmenter, VideoSegmenter
from sam3_agent.values.errors import ResumeError
from sam3_agent.values.files import atomic_write_bytes
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

__all__ = ["Checkpoint", "DirectoryLock"]


@dataclass(eq=False)
class Checkpoint:
    """The committed state of one session in its run directory: built with :meth:`start`,
    :meth:`resume` or :meth:`disabled` (no output directory)."""

    directory: Path | None
    _: KW_ONLY
    trace: Trace
    system_prompt: str
    checker_prompt: str
    fingerprint: Fingerprint | None
    saved: dict[str, Any] | None = None
    lock: DirectoryLock | None = None
    prompt_set: PromptSet | None = None
    """A resumed session's own prompt set (None when it kept none, or when starting)."""
    started_with: Fingerprint | None = None
    """A resumed session's fingerprint as it started (None when starting)."""
    journal: Journal | None = field(default=None, repr=False)
    """``calls.jsonl``: the round in progress (None without an output directory)."""
    # The current masks often stay the same for several rounds: encode them once.
    _encoded: tuple[Answer, dict[str, Any] | None] | None = field(
        default=None, init=False, repr=False
    )

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
        prompt_set: PromptSet | None = None,
    ) -> Checkpoint:
        """A new session in ``directory``: an empty trace, the prompts (and ``prompt_set``,
        which a resume renders with) saved, round 0 committed."""
        lock = DirectoryLock(directory, resuming=False)
        try:
            # An earlier session's state must not describe this directory's new trace.
            (directory / STATE_FILE).unlink(missing_ok=True)
            trace = Trace(directory)
            trace.save_text(rundir.SYSTEM_PROMPT, system_prompt)
            trace.save_text(rundir.CHECKER_PROMPT, checker_prompt)
            if prompt_set is not None:
                text = json.dumps(prompt_set.saved(), indent=1) + "\n"
                atomic_write_bytes(directory / rundir.PROMPT_SET, text.encode("ascii"))
            journal = Journal(directory / JOURNAL_FILE, 1, [])
            journal.reset(1)
            checkpoint = cls(
                directory,
                trace=trace,
                system_prompt=system_prompt,
                checker_prompt=checker_prompt,
                fingerprint=fingerprint,
                lock=lock,
                journal=journal,
            )
            checkpoint._write(SessionState())
        except BaseException:
            lock.close()
            raise
        return checkpoint

    @classmethod
    def resume(cls, directory: Path, fingerprint: Fingerprint) -> Checkpoint:
        """Continue the session saved in ``directory``; ResumeError when ``fingerprint`` (the
        input, query and settings given now) differs or its files are damaged."""
        if not (directory / STATE_FILE).is_file():  # say so before creating a lock file
            raise ResumeError(f"nothing to resume in {directory}: no {STATE_FILE}")
        lock = DirectoryLock(directory, resuming=True)
        try:
            saved = load_saved(directory)
            committed = read_committed(directory, saved, fingerprint)
            saved_set = committed.prompt_set
            replay = read_journal(directory / JOURNAL_FILE)
            journal = Journal(directory / JOURNAL_FILE, committed.round + 1, replay)
            checkpoint = cls(
                directory,
                trace=Trace(directory, committed.trace_bytes),
                system_prompt=committed.system_prompt,
                checker_prompt=committed.checker_prompt,
                fingerprint=fingerprint,
                saved=saved,
                lock=lock,
                prompt_set=PromptSet.from_saved(saved_set) if saved_set is not None else None,
                started_with=committed.fingerprint,
                journal=journal,
            )
        except BaseException:
            lock.close()
            raise
        logger.info(
            "resuming %s after round %s (%d journaled results to replay)",
            directory,
            saved["state"]["round"],
            journal.replayable,
        )
        return checkpoint

    def close(self) -> None:
        """Let another process use the run directory (the session is over here)."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None

    def chat_model(self, inner: ChatModel) -> ChatModel:
        return inner if self.journal is None else JournaledChatModel(inner, self.journal)

    def segmenter(self, inner: Segmenter) -> Segmenter:
        return inner if self.journal is None else JournaledSegmenter(inner, self.journal)

    def video_segmenter(self, inner: VideoSegmenter) -> VideoSegmenter:
        return inner if self.journal is None else JournaledVideoSegmenter(inner, self.journal)

    def restore(self, image_size: tuple[int, int]) -> SessionState:
        """The committed state (empty for a new session); ``image_size``: the masks' (h, w)."""
        if self.saved is None or self.directory is None:
            return SessionState()
        with damaged(self.directory):
            return SessionState.from_json(
                self.saved["state"], load_image=self._load_image, image_size=image_size
            )

    def commit(self, state: SessionState) -> None:
        """Commit ``state`` atomically, then start the next round's journal."""
        if self.directory is None:
            return
        self._write(state)
        if self.journal is not None:
            self.journal.reset(state.round + 1)

    def _write(self, state: SessionState) -> None:
        if self.directory is None or self.fingerprint is None:
            return
        trace_path = self.directory / rundir.TRACE
        # The trace is appended without syncing; sync it before the state that points past it.
        with open(trace_path, "rb+") as f:
            os.fsync(f.fileno())
            trace_bytes = f.seek(0, os.SEEK_END)
        document = {
            "format": FORMAT,
            "version": __version__,
            "fingerprint": self.fingerprint.to_json(),
            "prompts": {
                "system": prompt_sha256(self.system_prompt),
                "checker": prompt_sha256(self.checker_prompt),
            },
            "trace_bytes": trace_bytes,
            "state": state.to_json(self.trace.save_image, self._encode_masks),
        }
        # ASCII JSON: any string a model or user wrote (lone surrogates too) reads back as is.
        text = json.dumps(document, indent=1) + "\n"
        atomic_write_bytes(self.directory / STATE_FILE, text.encode("ascii"))

    def _encode_masks(self, detections: Answer | None) -> dict[str, Any] | None:
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
            raise refusal(directory, f"{doc['file']}: {e}") from e
        image = EncodedImage(
            name=str(doc["name"]),
            data=data,
            mime=doc["mime"],
            width=int(doc["width"]),
            height=int(doc["height"]),
        )
        if image.sha256 != doc["sha256"]:
            raise refusal(directory, f"{doc['file']} changed since it was saved")
        return image


def _inside(directory: Path, relative: str) -> Path:
    try:
        path = (directory / relative).resolve()
    except (OSError, ValueError) as e:
        raise refusal(directory, f"bad file name {relative!r}") from e
    if not path.is_relative_to(directory.resolve()):
        raise refusal(directory, f"{relative!r} is outside the run directory")
    return path
