"""The one writer of a Milvus index: upserts and deletes by document, then a new generation.

Rationale: docs/design-notes.md, "indexes/milvus/writes.py".
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from ..errors import IndexLockedError
from ..ingest.clean import clean_document
from ..paths import document_problem
from ..records import document_revision
from ..types import ChangeSet, Document, DocumentHead, IngestError, IngestReport, IngestWarning
from .client import Collection, batched
from .rows import rows_of
from .scope import quote
from .terms import held_keys, update_terms

__all__ = ["apply", "ingest"]

LOCK = "milvus-writer.lock"
BATCH_ROWS = 256


class MilvusIndex(Protocol):
    """What the writer uses of `indexes.milvus.MilvusIndex`."""

    name: str
    path: Path
    coll: Collection
    chunk_chars: int

    def heads(self, ids: Iterable[str]) -> dict[str, DocumentHead]: ...

    def holders(self) -> dict[str, tuple[str, str]]: ...


@contextlib.contextmanager
def _writer(index: MilvusIndex) -> Iterator[None]:
    """The index's writer lock (non-blocking). Raises IndexLockedError."""
    index.path.mkdir(parents=True, exist_ok=True)
    with open(index.path / LOCK, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexLockedError(index.name, str(index.path)) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ingest(index: MilvusIndex, documents: Iterable[Document | IngestError | IngestWarning], *,
           delete_missing: bool = False, replace: bool = False) -> IngestReport:
    """`KnowledgeIndex.ingest`'s contract on Milvus (module doc)."""
    report = IngestReport()
    kept: dict[str, Document] = {}
    origins: dict[str, str] = {}
    for item in documents:
        if isinstance(item, IngestError):
            report.errors.append((item.where, item.reason))
        elif isinstance(item, IngestWarning):
            report.warnings.append((item.where, item.reason))
        else:
            origin = item.origin or f"document {item.id!r}"
            if item.id in origins:
                report.warnings.append((origin, f"duplicate id {item.id!r} overrides {origins[item.id]} "
                                                "(the last record with an id is indexed)"))
                if kept[item.id].dataset != item.dataset:
                    report.errors.append((origin, f"id {item.id!r} is a document of dataset "
                                                  f"{kept[item.id].dataset!r} in this run, not {item.dataset!r}"))
                    report.refused[item.id] = "dataset"
                    continue
                del kept[item.id]
            kept[item.id] = item
            origins[item.id] = origin
    with _writer(index), index.coll.writing():
        _write(index, list(kept.values()), (), None, replace, report, atomic=False, delete_missing=delete_missing)
    return report


def apply(index: MilvusIndex, changes: ChangeSet) -> IngestReport:
    """`KnowledgeIndex.apply`'s contract on Milvus: all refused or all written (module doc)."""
    report = IngestReport()
    with _writer(index), index.coll.writing():
        _write(index, list(changes.upserts), changes.deletes, changes.datasets, changes.replace, report, atomic=True)
    return report


def _write(index: MilvusIndex, docs: list[Document], deletes: Iterable[str], datasets: tuple[str, ...] | None,
           replace: bool, report: IngestReport, *, atomic: bool, delete_missing: bool = False) -> None:
    c = index.coll
    c.create()
    held = index.heads([d.id for d in docs] + list(deletes))
    planned: list[tuple[Document, list[dict[str, object]], set[str]]] = []
    for doc in docs:
        doc, notes = clean_document(doc)
        report.warnings += [(n.where, n.reason) for n in notes]
        origin = doc.origin or f"document {doc.id!r}"
        head = held.get(doc.id)
        problem = document_problem(doc.id, doc.path)
        if problem is not None:
            report.errors.append((origin, f"{problem}: refused"))
            report.refused[doc.id] = "invalid"
            continue
        if head is not None and head.dataset != doc.dataset:
            report.errors.append((origin, f"id {doc.id!r} is a document of dataset {head.dataset!r} in the index, "
                                          f"not {doc.dataset!r}: refused, it would replace that document "
                                          "(give each dataset its own ids)"))
            report.refused[doc.id] = "dataset"
            continue
        if head is not None and head.source and doc.source and head.source != doc.source and not replace:
            report.errors.append((origin, f"id {doc.id!r} was indexed from {head.source}, this one comes from "
                                          f"{doc.source}: refused, it would replace that document "
                                          "(pass --replace to replace it, or give it another id)"))
            report.refused[doc.id] = "source"
            continue
        try:
            revision = document_revision(doc)
            if head is not None and head.revision == revision:
                report.unchanged += 1
                report.changes[doc.id] = "unchanged"
                continue
            rows, keys = rows_of(doc, revision, index.chunk_chars)
        except (TypeError, ValueError) as exc:
            report.errors.append((origin, f"cannot be stored: {exc}"))
            report.refused[doc.id] = "invalid"
            continue
        planned.append((doc, rows, keys))
    gone: list[str] = []
    for doc_id in deletes:
        head = held.get(doc_id)
        if head is None:
            report.changes[doc_id] = "absent"
        elif datasets is not None and head.dataset not in datasets:
            report.errors.append((f"document {doc_id!r}", "belongs to a dataset this run may not change: not deleted"))
            report.refused[doc_id] = "dataset"
        else:
            gone.append(doc_id)
    if delete_missing and not report.errors and docs:
        seen = {d.dataset for d in docs}
        names = {d.id for d in docs}
        gone += [d for d, (ds, _) in index.holders().items() if ds in seen and d not in names]
    elif delete_missing:
        report.warnings.append(("--delete-missing", "not run: an input error, or no document read; "
                                                    "no document was deleted"))
    if atomic and report.refused:
        report.changes.clear()
        report.unchanged = 0
        return
    old = held_keys(c, [d.id for d, _, _ in planned] + gone)
    for doc, rows, _ in planned:
        for part in batched(rows, BATCH_ROWS):
            c.call("upsert", c.chunks, part)
        c.call("delete", c.chunks, filter=f"doc_id == {quote(doc.id)} and chunk >= {len(rows)}")
        change = "added" if doc.id not in held else "updated"
        setattr(report, change, getattr(report, change) + 1)
        report.changes[doc.id] = change
        report.chunks += len(rows)
    for doc_id in gone:
        c.call("delete", c.chunks, filter=f"doc_id == {quote(doc_id)}")
        report.deleted += 1
        report.changes[doc_id] = "deleted"
    update_terms(c, {**{d.id: k for d, _, k in planned}, **dict.fromkeys(gone)}, old)
    if planned or gone:
        generation = c.generation() + 1
        c.set_generation(generation)
        report.commit = generation
