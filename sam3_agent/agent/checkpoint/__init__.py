"""Resumable sessions: ``session.json`` (the last committed round's state, replaced
atomically) and ``calls.jsonl`` (every backend answer of the round in progress, synced as
it arrives, so a resume repeats no finished call); one :class:`Checkpoint` per session."""

from __future__ import annotations

from sam3_agent.agent.checkpoint.journal import JOURNAL_FILE, Journal, read_journal
from sam3_agent.agent.checkpoint.saved import (
    STATE_FILE,
    Committed,
    DirectoryLock,
    check_resumable,
    load_saved,
)
from sam3_agent.agent.checkpoint.state import Ending, Fingerprint, SessionState
from sam3_agent.agent.checkpoint.store import Checkpoint

__all__ = [
    "JOURNAL_FILE", "STATE_FILE", "Checkpoint", "Committed", "DirectoryLock", "Ending",
    "Fingerprint", "Journal", "SessionState", "check_resumable", "load_saved", "read_journal",
]  # fmt: skip
