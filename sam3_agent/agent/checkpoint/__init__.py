"""Resumable sessions: the state committed after every round, and a call journal.

``session.json`` holds the last committed round's state (:class:`SessionState`) and what
the session started with (:class:`Fingerprint`, prompt hashes), replaced atomically;
``calls.jsonl`` every backend answer of the round in progress, synced as it arrives, so a
resume repeats no finished call. The loop uses one :class:`Checkpoint` per session:
:meth:`Checkpoint.restore` at the start, :meth:`Checkpoint.commit` after each round; without
an output directory both do nothing.
"""

from __future__ import annotations

from sam3_agent.agent.checkpoint.journal import JOURNAL_FILE, Journal, read_journal
from sam3_agent.agent.checkpoint.lock import DirectoryLock
from sam3_agent.agent.checkpoint.saved import (
    STATE_FILE,
    Committed,
    check_resumable,
    load_saved,
)
from sam3_agent.agent.checkpoint.state import Ending, Fingerprint, SessionState
from sam3_agent.agent.checkpoint.store import Checkpoint

__all__ = [
    "JOURNAL_FILE",
    "STATE_FILE",
    "Checkpoint",
    "Committed",
    "DirectoryLock",
    "Ending",
    "Fingerprint",
    "Journal",
    "SessionState",
    "check_resumable",
    "load_saved",
    "read_journal",
]
