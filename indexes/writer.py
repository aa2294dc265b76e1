"""The single writer of an index: the upsert loop of `ingest`, and the change sets of
`indexes.changes` (`apply_index`).

Rationale: docs/design-notes.md, "indexes/writer.py".
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import tantivy

from .analyser import Analyser
from .errors import DiskFullError, IndexLockedError, is_disk_full
from .ingest.clean import clean_document
from .paths import document_problem
from .records import document_revision
from .types import ChangeSet, Document, IngestError, IngestReport, IngestWarning

__all__ = ["INGEST_BATCH_DOCS", "WRITER_HEAP_BYTES", "apply_index", "ingest", "ingest_index", "open_writer"]

MIB = 1024 * 1024
WRITER_HEAP_BYTES = 256 * MIB
INGEST_BATCH_DOCS = 256  # documents analysed per batch
_T = TypeVar("_T")


def open_writer(index: tantivy.Index, name: str, path: str) -> tantivy.IndexWriter:
    """The one writer of `index` (heap WRITER_HEAP_BYTES, Tantivy's thread count).

    Raises IndexLockedError when another writer (this or another process) holds it.
    """
    try:
        return index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=0)
    except ValueError as exc:
        if "lock" in str(exc).lower():
            raise IndexLockedError(name, path) from None
        raise


def _storable_time(value: object) -> bool:
    """Can Tantivy's i64 field (and the revision's JSON) hold this publish_time? None can."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63)


def _queue(analyser: Analyser, batch: dict[str, tuple[Document, str]], held: dict[str, str],
           moved: AbstractSet[str] = frozenset()) -> None:
    """Queue the documents of `batch` whose revision differs from what the index holds.

    held: doc_id → revision in the index, updated here; moved: ids rewritten whatever their
    revision (their source changed). An id already indexed (or queued earlier in this run) is
    deleted before the batch's adds.
    """
    todo: list[tuple[Document, str]] = []
    deletes: list[str] = []
    for doc_id, (doc, revision) in batch.items():
        before = held.get(doc_id)
        if before == revision and doc_id not in moved:
            continue
        if before is not None:
            deletes.append(doc_id)
        held[doc_id] = revision
        todo.append((doc, revision))
    if todo or deletes:
        analyser.add(todo, deletes)


def ingest(
    writer: tantivy.IndexWriter,
    documents: Iterable[Document | IngestError | IngestWarning],
    known: dict[str, str],
    *,
    holders: dict[str, tuple[str, str]] | None = None,
    replace: bool = False,
    chunk_chars: int,
    delete_missing: bool = False,
    progress: bool = True,
    workers: int | None = None,
    desc: str = "index",
    deletes: Collection[str] = (),
    atomic: bool = False,
    datasets: Collection[str] | None = None,
    rewrite: bool = False,
) -> IngestReport:
    """Upsert `documents` through `writer` in one commit; returns what changed.

    known: doc_id → revision of what the index holds now (updated in place).
    holders: doc_id → (dataset, source) of what the index holds now (None: not checked, and
    delete_missing deletes in every dataset). A document
    whose id the index holds in another dataset, or an earlier document of this run holds in
    another dataset, is refused (an error naming both datasets): a run never replaces another
    dataset's document. Nor, unless `replace`, one the index holds from another
    source file (both `Document.source`s known and different: an error naming both); with
    `replace` each such replacement is a warning naming the old source. delete_missing only
    deletes documents of the datasets this run read documents of, and is not run when it read
    none (a folder of only unsupported files must not empty the index).
    A document whose id comes again later in the same run is replaced by the later one (the
    last wins) and each override is a warning naming both origins; the counts compare each
    id's final document with the index before the run, so a re-run of unchanged input reports
    0 changes and writes nothing. Documents are queued in batches of
    INGEST_BATCH_DOCS ids; a copy still queued is replaced without being written.
    deletes: ids deleted in the same commit (before the upserts; an id the index does not hold
    is 'absent'), each only when its dataset is one of `datasets` (None: any). atomic: a change
    set (`indexes.changes`): any refused document or delete rolls the whole run back. A run
    that changes nothing makes no commit (the generation stays); `report.commit` says whether
    one was made. rewrite: every document read is written again whatever its revision.
    See `indexes.store.KnowledgeIndex.ingest` for the rest. Rolls back on any exception and
    always waits for the writer's merging threads (which consumes the writer).
    """
    from tqdm import tqdm

    report = IngestReport()
    analyser = Analyser(writer, chunk_chars, workers)
    before = dict(known)
    batch: dict[str, tuple[Document, str]] = {}
    held = holders if holders is not None else {}
    run = _Run(report, held, replace)
    try:
        _delete(writer, deletes, known, held, datasets, report)
        bar = tqdm(documents, unit="doc", file=sys.stderr,
                   disable=not progress or not sys.stderr.isatty(), desc=desc)
        for item in bar:
            if isinstance(item, IngestError):
                report.errors.append((item.where, item.reason))
                continue
            if isinstance(item, IngestWarning):
                report.warnings.append((item.where, item.reason))
                continue
            admitted = run.admit(item)
            if admitted is None:
                continue
            if rewrite and item.id in before:
                run.moved.add(item.id)
            batch.pop(item.id, None)  # a queued earlier copy is never written
            batch[item.id] = admitted
            if len(batch) >= INGEST_BATCH_DOCS:
                _queue(analyser, batch, known, run.moved)
                batch = {}
        _queue(analyser, batch, known, run.moved)
        report.chunks = analyser.finish()
        bar.close()
        _count(run, before, known)
        if delete_missing:
            _delete_missing(writer, run, before, holders is not None)
        if (atomic and report.errors) or not (report.added or report.updated or report.deleted):
            writer.rollback()  # refused whole, or nothing to change: no commit, readers keep theirs
        else:
            report.commit = writer.commit()
    except BaseException:
        writer.rollback()
        raise
    finally:
        analyser.close()
        writer.wait_merging_threads()
    return report


def _count(run: _Run, before: dict[str, str], known: dict[str, str]) -> None:
    """Each id the run kept as added, updated or unchanged against the index `before` it."""
    report = run.report
    for doc_id in run.origins:
        previous = before.get(doc_id)
        change = "added" if previous is None else (
            "updated" if previous != known[doc_id] or doc_id in run.moved else "unchanged")
        setattr(report, change, getattr(report, change) + 1)
        report.changes[doc_id] = change


def _delete_missing(writer: tantivy.IndexWriter, run: _Run, before: dict[str, str], checked: bool) -> None:
    """`--delete-missing`: delete what the index held `before` and the run did not read, in the
    datasets the run read (every dataset when holders were not `checked`); not at all when the
    run read nothing or had an input error (a warning says why)."""
    report = run.report
    seen = set(run.run_datasets.values())
    if not run.origins:
        report.warnings.append(("--delete-missing", "not run: this run read no document, so no "
                                                    "document was deleted"))
    elif report.errors:
        n = len(report.errors)
        report.warnings.append(
            ("--delete-missing", f"not run because of {n} input error{'s' if n != 1 else ''}: "
                                 "no document was deleted"))
    else:
        for doc_id in sorted(set(before) - set(run.origins)):
            if checked and run.held.get(doc_id, ("", ""))[0] not in seen:
                continue  # another dataset's document: not this run's to delete
            writer.delete_documents_by_term("doc_id", doc_id)
            report.deleted += 1
            report.changes[doc_id] = "deleted"


def _delete(writer: tantivy.IndexWriter, deletes: Collection[str], known: dict[str, str],
            held: dict[str, tuple[str, str]], datasets: Collection[str] | None, report: IngestReport) -> None:
    """Delete each id of `deletes` the index holds (`ingest`), keeping `known` and `held` in step."""
    for doc_id in deletes:
        if doc_id not in known:
            report.changes[doc_id] = "absent"
        elif datasets is not None and held.get(doc_id, ("", ""))[0] not in datasets:
            report.errors.append((f"document {doc_id!r}", "belongs to a dataset this run may not change: "
                                                           "not deleted"))
            report.refused[doc_id] = "dataset"
        else:
            writer.delete_documents_by_term("doc_id", doc_id)
            del known[doc_id]
            held.pop(doc_id, None)
            report.deleted += 1
            report.changes[doc_id] = "deleted"


def _opened(index: tantivy.Index, name: str, path: str,
            read: Callable[[tantivy.Searcher], _T]) -> tuple[tantivy.IndexWriter, _T]:
    """The one writer of `index` and what `read` finds in its latest commit, read after the
    writer was taken (another writer may have committed since this reader loaded)."""
    w = open_writer(index, name, path)
    try:
        index.reload()
        return w, read(index.searcher())
    except BaseException:
        w.rollback()
        w.wait_merging_threads()
        raise


def ingest_index(index: tantivy.Index, schema: tantivy.Schema, name: str, path: str,
                 documents: Iterable[Document | IngestError | IngestWarning], *, chunk_chars: int,
                 delete_missing: bool, replace: bool, progress: bool, workers: int | None) -> IngestReport:
    """`ingest` into the Tantivy `index` (named `name`, at `path`) through its one writer,
    checked against what it holds now (revisions, datasets, sources: `indexes.documents`).
    Raises IndexLockedError when another writer holds it; the caller reloads its reader."""
    from .documents import holders, revisions

    with _disk_full_named(name, path):
        w, (known, held) = _opened(index, name, path, lambda s: (revisions(s, schema), holders(s, schema)))
        return ingest(w, documents, known, holders=held, replace=replace, chunk_chars=chunk_chars,
                      delete_missing=delete_missing, progress=progress, workers=workers, desc=f"index {name}")


def apply_index(index: tantivy.Index, schema: tantivy.Schema, name: str, path: str, changes: ChangeSet, *,
                chunk_chars: int, progress: bool = False, workers: int | None = 1) -> IngestReport:
    """`ingest` of a change set (`indexes.changes`) into the Tantivy `index` through its one writer:
    atomic, checked against what the index holds for the ids it touches only
    (`indexes.documents.heads`); analysed in this process unless `workers` > 1. Raises
    IndexLockedError when another writer holds it."""
    from .documents import heads

    with _disk_full_named(name, path):
        w, found = _opened(index, name, path, lambda s: heads(s, schema, changes.ids))
        known = {i: h.revision for i, h in found.items()}
        held = {i: (h.dataset, h.source) for i, h in found.items()}
        return ingest(w, changes.upserts, known, holders=held, replace=changes.replace, chunk_chars=chunk_chars,
                      progress=progress, workers=workers, deletes=changes.deletes, atomic=True,
                      datasets=changes.datasets, desc=f"index {name}", rewrite=changes.rewrite)


@contextmanager
def _disk_full_named(name: str, path: str) -> Iterator[None]:
    """A write that finds no space (`errors.is_disk_full`: Tantivy says it in a ValueError, or
    says only that a thread failed while the device is short of space) raises DiskFullError
    naming the index; `ingest` rolled it back already."""
    try:
        yield
    except (OSError, ValueError) as exc:
        if is_disk_full(exc, path):
            raise DiskFullError(name, path) from None
        raise

@dataclass
class _Run:
    """One `ingest` run's bookkeeping: its report, what the index holds (doc_id → (dataset,
    source)), whether sources may be replaced, and what the run kept so far: each id's origin and
    dataset, and the ids whose source it changes."""

    report: IngestReport
    held: dict[str, tuple[str, str]]
    replace: bool
    origins: dict[str, str] = field(default_factory=dict)  # in first-seen order
    run_datasets: dict[str, str] = field(default_factory=dict)
    moved: set[str] = field(default_factory=set)

    def admit(self, item: Document) -> tuple[Document, str] | None:
        """(the document as it will be indexed, its revision), or None after recording in the
        report why it is refused; an override of an earlier copy is recorded as a warning."""
        report = self.report
        # What the index holds is what may be served (indexes.safe_text): readers clean
        # already (no change, no note again); a Document built in code is cleaned here.
        item, notes = clean_document(item)
        report.warnings += [(n.where, n.reason) for n in notes]
        origin = item.origin or f"document {item.id!r}"
        if (problem := document_problem(item.id, item.path)) is not None:
            # Readers refuse these first (indexes.paths); a Document built in code is refused here.
            report.errors.append((origin, f"{problem}: refused"))
            report.refused[item.id] = "invalid"
            return None
        if not _storable_time(item.publish_time):
            # Readers never make one (indexes.publish_time); a Document built in code may:
            # refuse it alone instead of failing the whole commit.
            report.errors.append((origin, f"publish_time {item.publish_time!r} is not a 64-bit integer"))
            report.refused[item.id] = "invalid"
            return None
        try:
            revision = document_revision(item)
        except TypeError:  # orjson: a str holding a lone surrogate ("\ud800" in JSON) is no UTF-8
            report.errors.append((origin, "a text field holds a lone surrogate (an escape such as \\ud800 "
                                          "with no pair): not Unicode text, record refused"))
            report.refused[item.id] = "invalid"
            return None
        indexed_as = self.held.get(item.id)
        other = self.run_datasets.get(item.id, indexed_as[0] if indexed_as is not None else None)
        if other is not None and other != item.dataset:
            report.errors.append((origin, f"id {item.id!r} is a document of dataset {other!r}"
                                          f"{' in this run' if item.id in self.run_datasets else ' in the index'}, "
                                          f"not {item.dataset!r}: refused, it would replace that document "
                                          "(give each dataset its own ids)"))
            report.refused[item.id] = "dataset"
            return None
        old_source = indexed_as[1] if indexed_as is not None else ""
        if old_source and item.source and old_source != item.source and item.id not in self.run_datasets:
            if not self.replace:
                report.errors.append((origin, f"id {item.id!r} was indexed from {old_source}, this one comes "
                                              f"from {item.source}: refused, it would replace that document "
                                              "(pass --replace to replace it, or give it another id)"))
                report.refused[item.id] = "source"
                return None
            report.warnings.append((origin, f"replaces {item.id!r} from {old_source} (--replace)"))
            self.moved.add(item.id)
        self.run_datasets[item.id] = item.dataset
        earlier = self.origins.get(item.id)
        if earlier is not None:
            report.warnings.append((origin, f"duplicate id {item.id!r} overrides {earlier} "
                                            "(the last record with an id is indexed)"))
        self.origins[item.id] = origin
        return item, revision
