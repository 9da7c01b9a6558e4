"""Resumable sessions: the state of a session committed after every round, and a call journal.

A run directory holds, next to ``result.json`` and ``trace.jsonl``:

* ``session.json``: the last committed round's state (:class:`SessionState`): the steps with
  their observations (images by file name under ``images/``), the phrases tried, the current
  masks as COCO RLE with boxes and scores, the budgets used, token usage, timings, how the
  session ended (once it has), the size of ``trace.jsonl`` at that moment, and what the
  session was started with (:class:`Fingerprint`, prompt hashes). Replaced atomically.
* ``calls.jsonl``: every MLLM answer and SAM 3 result of the round in progress, appended
  (and synced) the moment it arrives. A session killed mid-round replays them on resume
  instead of asking again, so no finished call is repeated and the replies are the same.

``system_prompt.txt`` and ``checker_prompt.txt`` are the prompts the session started with;
a resumed session reads them back, so it keeps its prompt set after the package's changes.
``.session.lock`` keeps a second process out while a session runs.

The agent loop uses one :class:`Checkpoint` per session: :meth:`Checkpoint.restore` at the
start, :meth:`Checkpoint.commit` after each round. Without an output directory both do
nothing and the backends are used unwrapped.
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
