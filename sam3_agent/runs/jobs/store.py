"""A run directory's results store: one SQLite file, a row per finished job keyed by its id and
synced at once, and the run's settings (reopening with others is refused)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic

from sam3_agent.runs.jobs.base import JobResult, R
from sam3_agent.values.errors import UserError
from sam3_agent.values.files import safe_name
from sam3_agent.values.text import changed

logger = logging.getLogger(__name__)

STORE_NAME = "results.sqlite"
_OWN_KEYS = frozenset({"config", "schema", "created_at", "planned"})
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- "samples": the name from when the store held evaluation samples only; kept so that
-- run directories made then still resume.
CREATE TABLE IF NOT EXISTS samples (
    id TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    status TEXT NOT NULL,
    infra_error INTEGER NOT NULL,
    finished_at REAL NOT NULL
);
"""


def job_dir_name(job_id: str) -> str:
    """The directory name of a job's files (ids differing in unsafe characters never share one)."""
    return safe_name(job_id, max_len=80)


def _config_diff(
    stored: Mapping[str, Any], wanted: Mapping[str, Any], prefix: str = ""
) -> list[str]:
    """Each setting that differs, by its dotted name (``agent.max_rounds``)."""
    found = []
    for key in sorted(set(stored) | set(wanted)):
        was, now = stored.get(key), wanted.get(key)
        if was == now:
            continue
        if isinstance(was, Mapping | None) and isinstance(now, Mapping | None):
            found += _config_diff(was or {}, now or {}, f"{prefix}{key}.")
        else:
            found.append(changed(f"{prefix}{key}", was, now))
    return found


Decode = Callable[[Mapping[str, Any]], R]
"""Reads a stored record back: the record type's ``from_json``."""


class ResultStore(Generic[R]):
    """The store of one run directory, holding records of one type; use from one thread."""

    def __init__(self, run_dir: Path, decode: Decode[R]) -> None:
        """Open (creating the tables of) ``run_dir``'s store file."""
        self.run_dir = run_dir
        self._decode = decode
        path = run_dir / STORE_NAME
        try:
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk when it returns, so a kill right after loses nothing.
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            raise UserError(f"cannot open results store {path}: {e}") from e

    @classmethod
    def create_or_resume(
        cls, run_dir: Path, config: Mapping[str, Any], decode: Decode[R]
    ) -> ResultStore[R]:
        """Open ``run_dir``'s store, creating it with ``config`` if new."""
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create run directory {run_dir}: {e}") from e
        store = cls(run_dir, decode)
        wanted = json.loads(json.dumps(dict(config)))  # normalise tuples etc. as stored
        stored = store.config()
        if stored is None:
            store._set_meta("config", wanted)
            store._set_meta("schema", SCHEMA_VERSION)
            store._set_meta("created_at", time.time())
            logger.info("new run in %s", run_dir)
        else:
            diff = _config_diff(stored, wanted)
            if diff:
                store.close()
                raise UserError(
                    f"{run_dir} holds a run made with different settings ({'; '.join(diff)}); "
                    "use the same settings to resume, or another --out directory"
                )
            logger.info("resuming run in %s (%d jobs finished)", run_dir, store.count())
        return store

    def _set_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    def _get(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_planned(self, count: int) -> None:
        """Record how many jobs the latest invocation set out to run."""
        self._set_meta("planned", int(count))

    def planned(self) -> int | None:
        planned = self._get("planned")
        return None if planned is None else int(planned)

    def set_meta(self, key: str, value: Any) -> None:
        """Record a JSON-able fact about the run under ``key`` (the latest value wins)."""
        if key in _OWN_KEYS:
            raise ValueError(f"{key!r} is kept by the results store itself")
        self._set_meta(key, value)

    def meta(self, key: str) -> Any:
        """What :meth:`set_meta` recorded under ``key``; None when nothing (or no JSON) was."""
        try:
            return self._get(key)
        except ValueError:
            logger.warning("%s: unreadable %r record in the results store", self.run_dir, key)
            return None

    def config(self) -> dict[str, Any] | None:
        config = self._get("config")
        return None if config is None else dict(config)

    def commit(self, result: JobResult) -> None:
        """Store one finished job durably (replacing an earlier row of the same id)."""
        self._db.execute(
            "INSERT OR REPLACE INTO samples (id, record, status, infra_error, finished_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                result.id,
                json.dumps(result.to_json(), separators=(",", ":")),
                result.status,
                int(result.infra_error),
                time.time(),
            ),
        )

    def finished_ids(self, *, include_infra_errors: bool = True) -> set[str]:
        """Ids of stored jobs; without infrastructure failures when asked (to retry them)."""
        query = "SELECT id FROM samples"
        if not include_infra_errors:
            query += " WHERE infra_error = 0"
        return {row[0] for row in self._db.execute(query)}

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def results(self) -> list[R]:
        """Sorted by id."""
        rows = self._db.execute("SELECT record FROM samples ORDER BY id")
        return [self._decode(json.loads(r[0])) for r in rows]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultStore[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def reading(run_dir: Path, decode: Decode[R]) -> ResultStore[R]:
    """The store of a finished or running run, for reports."""
    path = run_dir / STORE_NAME
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no {STORE_NAME})")
    store = ResultStore(run_dir, decode)
    if store.config() is None:
        store.close()
        raise UserError(f"{path} holds no run settings; was the run ever started?")
    return store
