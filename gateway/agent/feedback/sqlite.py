"""The embedded default IssueTracker: one SQLite file, so feedback works with no GitHub.

Rationale: docs/design-notes.md, "gateway/agent/feedback/sqlite.py".
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import orjson

from gateway.agent.feedback.tracker import IssueDraft, TrackedIssue
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.errors import ToolError
from gateway.core.types import Clock

T = TypeVar("T")
BUSY_SECONDS = 5.0
"""How long a call waits for another writer of the file (SQLite's busy timeout)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    dedupe_key TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    labels TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kind, dedupe_key)
)
"""


class StoreUnavailable(ToolError):
    """The SQLite file could not be opened or written (access.tool_failed, retryable). path:
    the file; problem: the reason as SQLite or the OS says it. The message keeps both from
    tool callers; the console names them to its admins."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__("access.tool_failed", "the feedback store is unavailable", retryable=True)
        self.path, self.problem = path, problem


class SqliteTracker:
    """IssueTracker over a SQLite file. path: the database file (parent created at the first
    call); clock: the app clock (created_at in unix seconds)."""

    name = "sqlite"

    def __init__(self, path: Path, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self._clock = clock
        self._ready = False
        self._first = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        """A connection; the first call of this process creates the file, WAL mode and the table
        (`_prepare`, under a lock: two first calls at once contend for the journal-mode switch)."""
        if not self._ready:
            with self._first:
                if not self._ready:
                    self._prepare()
                    self._ready = True
        return sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)

    def _prepare(self) -> None:
        """WAL mode and the table. Another process (a second worker) switching the same new file
        makes SQLite answer 'database is locked' at once, past its busy handler: tried again for
        up to BUSY_SECONDS. Raises sqlite3.Error / OSError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            finally:
                db.close()
            time.sleep(0.01)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(self.path, str(exc) if isinstance(exc, sqlite3.Error)
                                   else exc.strerror or type(exc).__name__) from None

    def _row(self, db: sqlite3.Connection, kind: str, key: str) -> TrackedIssue | None:
        row = db.execute("SELECT count, created_at, rowid FROM records WHERE kind = ? AND dedupe_key = ?",
                         (kind, key)).fetchone()
        if row is None:
            return None
        return TrackedIssue(kind, key, int(row[1]), int(row[0]), {"tracker": "sqlite", "rowid": int(row[2])})

    def _find(self, kind: str, key: str) -> TrackedIssue | None:
        with closing(self._connect()) as db:
            return self._row(db, kind, key)

    def _create(self, d: IssueDraft, now: int) -> TrackedIssue:
        with closing(self._connect()) as db:
            db.execute("INSERT INTO records (kind, dedupe_key, title, body, labels, created_at) "
                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, dedupe_key) DO NOTHING",
                       (d.kind, d.dedupe_key, d.title, d.body, orjson.dumps(list(d.labels)).decode(), now))
            row = self._row(db, d.kind, d.dedupe_key)
            assert row is not None
            return row

    def _bump(self, kind: str, key: str) -> int | None:
        with closing(self._connect()) as db:
            row = db.execute("UPDATE records SET count = count + 1 WHERE kind = ? AND dedupe_key = ? "
                             "RETURNING count", (kind, key)).fetchone()
            return None if row is None else int(row[0])

    async def find(self, kind: str, dedupe_key: str) -> TrackedIssue | None:
        """The record filed under (kind, dedupe_key), or None."""
        return await self._run(self._find, kind, dedupe_key)

    async def create(self, draft: IssueDraft) -> TrackedIssue:
        """File `draft`, or return the record already filed under its key (never two rows)."""
        return await self._run(self._create, draft, int(self._clock.now()))

    async def bump(self, kind: str, dedupe_key: str) -> int | None:
        """Raise the record's count by one; the new count, or None when there is no record."""
        return await self._run(self._bump, kind, dedupe_key)

    async def close(self) -> None:
        return None
