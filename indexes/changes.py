"""Upserts and deletes applied to an index in one commit, all or nothing: the one write
primitive besides `kbgate index add`'s stream (the document API, `kbgate sync`), and what a
sync reads back (`ids_from_source`).

Rationale: docs/design-notes.md, "indexes/changes.py".
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import ledger
from .errors import IndexLockedError
from .records import document_revision
from .types import ChangeSet, DocumentHead, ServedIndex

__all__ = ["CHANGES_DB", "Applied", "Change", "ChangeReport", "ChangeSet", "Refusal", "apply_changes",
           "document_head", "ids_from_source"]

log = logging.getLogger("kbgate.changes")

CHANGES_DB = "kbgate-changes.sqlite3"
FIRST_RETRY_SECONDS = 0.02  # then doubled, up to MAX_RETRY_SECONDS, while another writer holds the index
MAX_RETRY_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class Change:
    """What became of one id: change 'added' | 'updated' | 'unchanged' | 'deleted' | 'absent';
    revision: the upserted document's revision (None for a delete)."""

    doc_id: str
    change: str
    revision: str | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """One id that refused its set: kind 'dataset' | 'source' | 'invalid' (`IngestReport.refused`)
    and the writer's reason (a 'source' reason names the file the index holds it from)."""

    doc_id: str
    kind: str
    reason: str


@dataclass(slots=True)
class ChangeReport:
    """What `apply_changes` did.

    changes: one Change per id of the set, upserts first (empty when refused). refused: the
    ids that refused the set (then nothing was written). warnings: (where, message) of the
    writer. commit: the opstamp of the commit made, None when none was (nothing changed, or
    refused). generation: the commit the index shows after the call (the one made, or the one
    already holding every change). applied_at: unix seconds of the commit, None without one.
    chunks: chunks written.
    """

    changes: list[Change] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    commit: int | None = None
    generation: int | None = None
    applied_at: float | None = None
    chunks: int = 0

    def count(self, change: str) -> int:
        """How many ids of the set became `change` ('added', 'updated', 'unchanged', 'deleted',
        'absent'): the figures `kbgate index add` and `kbgate sync` print."""
        return sum(1 for c in self.changes if c.change == change)


@dataclass(frozen=True, slots=True)
class Applied:
    """`document_head`'s answer: what the index holds for one id (`head`), the commit the reader
    showed, and when the held revision was applied by a change set (None: not recorded)."""

    head: DocumentHead
    generation: int | None
    applied_commit: int | None = None
    applied_at: float | None = None


def apply_changes(index: ServedIndex, changes: ChangeSet, *, wait_seconds: float = 0.0,
                  progress: bool = False, workers: int | None = 1,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  now: Callable[[], float] = time.time) -> ChangeReport:
    """Apply `changes` to `index` (a handle from `IndexStore.create_or_open_for_write`) in one
    commit, all or nothing (module doc). Blocks: run it off an event loop.

    wait_seconds: how long to wait for the index's writer while another holds it (0: one try).
    progress: a bar on stderr when it is a TTY (`kbgate sync`). workers: analysis processes
    (`KnowledgeIndex.ingest`'s; 1, the default, analyses in this process, as a server must).
    clock / sleep: monotonic seconds and the wait (seams); now: unix seconds of the record.
    Raises IndexLockedError when the writer stays held for `wait_seconds`, EmbeddingError when a
    hybrid index's provider fails (before the commit: nothing was written), IndexStoreError /
    OSError when the index cannot be written.
    """
    deadline = clock() + wait_seconds
    delay = FIRST_RETRY_SECONDS
    while True:
        try:
            written = index.apply(changes, progress=progress, workers=workers)
            break
        except IndexLockedError:
            left = deadline - clock()
            if left <= 0:
                raise
            sleep(min(delay, left))
            delay = min(delay * 2, MAX_RETRY_SECONDS)
    report = ChangeReport(warnings=written.warnings, commit=written.commit, generation=index.generation,
                          chunks=written.chunks)
    if written.refused:
        origins = {d.origin or f"document {d.id!r}": d.id for d in changes.upserts}
        reasons = {origins.get(where, where): reason for where, reason in written.errors}
        for doc_id, kind in written.refused.items():
            report.refused.append(Refusal(doc_id, kind, reasons.get(doc_id) or reasons.get(f"document {doc_id!r}", "")))
        ledger.note_refused(index.path, [(r.doc_id, r.kind, r.reason) for r in report.refused], via=changes.via,
                            now=now())
        return report
    revisions = {d.id: document_revision(d) for d in changes.upserts}
    report.changes = [Change(i, written.changes.get(i, "unchanged"), revisions.get(i)) for i in changes.ids]
    if written.commit is not None:
        report.generation = written.commit
        report.applied_at = now()
        _record(index.path, report)
    originals = dict(changes.originals)
    ledger.note_written(index.path, {c.doc_id: c.change for c in report.changes},
                        ledger.sizes_of(changes.upserts, originals), via=changes.via,
                        now=report.applied_at or now(), originals=originals)
    return report


def ids_from_source(index: ServedIndex, prefix: str) -> dict[str, str]:
    """doc_id → source of every document in the index whose source (`Document.source`) starts
    with `prefix`, read from its latest commit: what a sync source indexed, so a file or page it
    no longer finds is deleted even when its own record of what it saw was lost."""
    index.maybe_reload(force=True)
    found = index.holders()
    return {doc_id: source for doc_id, (_, source) in found.items() if source.startswith(prefix)}


def document_head(index: ServedIndex, doc_id: str) -> Applied | None:
    """What `index` holds for `doc_id` (its reader at most `indexes.store.RELOAD_CHECK_SECONDS`
    behind the latest commit), with the time its revision was applied by a change set; None
    when the index holds no such document. Never raises for a missing or unreadable record."""
    head = index.heads([doc_id]).get(doc_id)
    if head is None:
        return None
    try:
        with _db(index.path) as db:
            row = db.execute("SELECT revision, commit_, at FROM applied WHERE doc_id = ?", (doc_id,)).fetchone()
    except (OSError, sqlite3.Error):
        row = None
    if row is None or row[0] != head.revision:
        return Applied(head, index.generation)
    return Applied(head, index.generation, int(row[1]), float(row[2]))


@contextlib.contextmanager
def _db(folder: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(folder / CHANGES_DB, timeout=5.0)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS applied (doc_id TEXT PRIMARY KEY, revision TEXT NOT NULL, "
                   "commit_ INTEGER NOT NULL, at REAL NOT NULL)")
        with db:
            yield db
    finally:
        db.close()


def _record(folder: Path, report: ChangeReport) -> None:
    """Record the commit's changes (module doc, "When"); a failure is logged, never raised: the
    commit is made, and its caller must be told so."""
    assert report.commit is not None and report.applied_at is not None
    try:
        with _db(folder) as db:
            db.executemany("INSERT OR REPLACE INTO applied VALUES (?, ?, ?, ?)",
                           [(c.doc_id, c.revision, report.commit, report.applied_at) for c in report.changes
                            if c.change in ("added", "updated")])
            db.executemany("DELETE FROM applied WHERE doc_id = ?",
                           [(c.doc_id,) for c in report.changes if c.change == "deleted"])
    except (OSError, sqlite3.Error) as exc:
        log.warning("change record not written", extra={"index": folder.name, "problem": str(exc)[:200]})
