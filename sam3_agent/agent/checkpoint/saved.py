"""Reading a run directory's committed session: ``session.json`` and ``prompt_set.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.state import Fingerprint
from sam3_agent.values.errors import ResumeError
from sam3_agent.values.images import RGBImage

if TYPE_CHECKING:
    from sam3_agent.values.config import AgentConfig

STATE_FILE = rundir.STATE
PROMPT_SET_FILE = rundir.PROMPT_SET
FORMAT = 1
"""The format of ``session.json`` this version writes and reads."""


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
