"""Each document's life beside its index: when it was added and last updated, its size, what
wrote it (console, api, sync, cli), its source text as written, and the writer's last refusal.
Kept in the index folder's changes database (`indexes.changes.CHANGES_DB`), table per concern;
an index written before has no rows, and readers show "unknown".
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .types import Document

__all__ = ["VIA", "Entry", "Refused", "entries", "note_refused", "note_written", "original", "size_of", "sizes_of"]

log = logging.getLogger("kbgate.changes")

DB = "kbgate-changes.sqlite3"  # the same file as indexes.changes.CHANGES_DB
VIA = ("console", "api", "sync", "cli")


@dataclass(frozen=True, slots=True)
class Entry:
    """One document's record: added_at (unix s; None: added before the ledger) / updated_at,
    size (bytes of its source text, else of its stored text), via (one of VIA; '' unknown),
    has_original (its source text is kept)."""

    doc_id: str
    added_at: float | None
    updated_at: float
    size: int | None
    via: str
    has_original: bool


@dataclass(frozen=True, slots=True)
class Refused:
    """The writer's last refusal of an id: at (unix s), via, kind ('dataset' | 'source' | 'invalid'), reason."""

    doc_id: str
    at: float
    via: str
    kind: str
    reason: str


@contextlib.contextmanager
def _db(folder: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(Path(folder) / DB, timeout=5.0)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS documents (doc_id TEXT PRIMARY KEY, added_at REAL, "
                   "updated_at REAL NOT NULL, size INTEGER, via TEXT NOT NULL, original TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS refused (doc_id TEXT PRIMARY KEY, at REAL NOT NULL, via TEXT NOT NULL, "
                   "kind TEXT NOT NULL, reason TEXT NOT NULL)")
        with db:
            yield db
    finally:
        db.close()


def size_of(doc: Document, original: str | None = None) -> int:
    """Bytes (UTF-8) of `original` when given, else of the document's section texts."""
    if original is not None:
        return len(original.encode("utf-8"))
    return sum(len(s.heading.encode("utf-8")) + len(s.text.encode("utf-8")) for s in doc.sections)


def sizes_of(docs: Iterable[Document], originals: Mapping[str, str]) -> dict[str, int]:
    """doc_id → `size_of` each upserted document."""
    return {d.id: size_of(d, originals.get(d.id)) for d in docs}


def note_written(folder: Path, changes: Mapping[str, str], sizes: Mapping[str, int], *, via: str, now: float,
                 originals: Mapping[str, str] | None = None) -> None:
    """Record a commit: `changes` doc_id → 'added' | 'updated' | 'unchanged' | 'deleted' | …
    (others ignored); `sizes` doc_id → bytes of each upsert; `originals` doc_id → source text
    (an id without one loses any kept before: it no longer matches); via '' keeps the one
    recorded (a re-index). Logged, never raised."""
    originals = originals or {}
    try:
        with _db(folder) as db:
            for doc_id, change in changes.items():
                if change == "deleted":
                    db.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
                    db.execute("DELETE FROM refused WHERE doc_id = ?", (doc_id,))
                    continue
                size = sizes.get(doc_id)
                if size is None or change not in ("added", "updated", "unchanged"):
                    continue
                text = originals.get(doc_id)
                db.execute("DELETE FROM refused WHERE doc_id = ?", (doc_id,))
                if change == "unchanged":
                    if text is not None:
                        db.execute("UPDATE documents SET original = ? WHERE doc_id = ?", (text, doc_id))
                    continue
                row = db.execute("SELECT added_at, via FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
                # an update of a document written before the ledger: when it was added is not known
                added = now if change == "added" else (row[0] if row is not None else None)
                db.execute("INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                           (doc_id, added, now, size, via or (str(row[1]) if row else ""), text))
    except (OSError, sqlite3.Error) as exc:
        log.warning("document ledger not written", extra={"index": Path(folder).name, "problem": str(exc)[:200]})


def note_refused(folder: Path, refusals: Iterable[tuple[str, str, str]], *, via: str, now: float) -> None:
    """Record the writer's refusals: (doc_id, kind, reason) each. Logged, never raised."""
    try:
        with _db(folder) as db:
            db.executemany("INSERT OR REPLACE INTO refused VALUES (?, ?, ?, ?, ?)",
                           [(i, now, via, kind, reason[:500]) for i, kind, reason in refusals])
    except (OSError, sqlite3.Error) as exc:
        log.warning("document ledger not written", extra={"index": Path(folder).name, "problem": str(exc)[:200]})


def entries(folder: Path) -> tuple[dict[str, Entry], dict[str, Refused]]:
    """Every document's Entry and every recorded refusal, by id; ({}, {}) when none is recorded
    or the database cannot be read."""
    if not (Path(folder) / DB).is_file():
        return {}, {}
    try:
        with _db(folder) as db:
            rows = db.execute("SELECT doc_id, added_at, updated_at, size, via, original IS NOT NULL FROM documents")
            docs = {r[0]: Entry(r[0], None if r[1] is None else float(r[1]), float(r[2]), r[3], str(r[4]), bool(r[5]))
                    for r in rows}
            refused = {r[0]: Refused(r[0], float(r[1]), str(r[2]), str(r[3]), str(r[4]))
                       for r in db.execute("SELECT doc_id, at, via, kind, reason FROM refused")}
    except (OSError, sqlite3.Error):
        return {}, {}
    return docs, refused


def original(folder: Path, doc_id: str) -> str | None:
    """The source text `doc_id` was last written from, or None when none is kept."""
    if not (Path(folder) / DB).is_file():
        return None
    try:
        with _db(folder) as db:
            row = db.execute("SELECT original FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    except (OSError, sqlite3.Error):
        return None
    return None if row is None or row[0] is None else str(row[0])
