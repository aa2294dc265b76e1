"""The single writer of an index: parallel analysis and the upsert loop of `ingest`.

`ingest` upserts documents by id in one Tantivy commit (readers see all of it or none of
it). The analysis of each document (`indexes.records.chunk_fields`) runs in this process
for small batches and in a pool of spawned worker processes once more than
PARALLEL_MIN_DOCS documents need indexing.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import tantivy

from .errors import IndexLockedError
from .records import chunk_fields, document_revision
from .types import Document, IngestError, IngestReport, IngestWarning

__all__ = ["INGEST_BATCH_DOCS", "PARALLEL_MIN_DOCS", "WRITER_HEAP_BYTES", "ingest", "open_writer"]

MIB = 1024 * 1024
WRITER_HEAP_BYTES = 256 * MIB
INGEST_BATCH_DOCS = 256  # documents analysed per batch
PARALLEL_MIN_DOCS = 2000  # below this, worker start-up (rjieba load) costs more than it saves


class _Analyser:
    """Turns batches of (Document, revision) into tantivy documents added to a writer.

    In this process while few documents have been seen; from PARALLEL_MIN_DOCS on, in a
    pool of `workers` spawned processes (spawn, not fork: the writer runs threads).
    """

    def __init__(self, chunk_chars: int, workers: int | None) -> None:
        self.chunk_chars = chunk_chars
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.seen = 0
        self.pool: ProcessPoolExecutor | None = None

    def add(self, writer: tantivy.IndexWriter, batch: list[tuple[Document, str]]) -> int:
        """Analyse `batch`, add its chunks to `writer`; returns the number of chunks added."""
        if not batch:
            return 0
        self.seen += len(batch)
        if self.pool is None and self.workers > 1 and self.seen > PARALLEL_MIN_DOCS:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        docs = [d for d, _ in batch]
        revisions = [r for _, r in batch]
        sizes = [self.chunk_chars] * len(batch)
        results: Iterable[list[dict[str, Any]]] = []
        if self.pool is not None:
            try:
                results = list(self.pool.map(chunk_fields, docs, revisions, sizes, chunksize=16))
            except BrokenProcessPool:
                # e.g. a script without an `if __name__ == "__main__":` guard, re-run by spawn
                print("kbgate: analysis worker processes failed; indexing in this process",
                      file=sys.stderr)
                self.close()
                self.workers = 1
        if self.pool is None:
            results = map(chunk_fields, docs, revisions, sizes)
        added = 0
        for fields in results:
            for f in fields:
                writer.add_document(tantivy.Document(**f))
                added += 1
        return added

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


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


def _write(writer: tantivy.IndexWriter, analyser: _Analyser, batch: dict[str, tuple[Document, str]],
           held: dict[str, str]) -> int:
    """Write the documents of `batch` whose revision differs from what the index holds.

    held: doc_id → revision in the index, updated here. Deletes come before the adds of the
    same batch (a Tantivy delete only affects documents added before it). Returns chunks added.
    """
    todo: list[tuple[Document, str]] = []
    for doc_id, (doc, revision) in batch.items():
        before = held.get(doc_id)
        if before == revision:
            continue
        if before is not None:
            writer.delete_documents_by_term("doc_id", doc_id)
        held[doc_id] = revision
        todo.append((doc, revision))
    return analyser.add(writer, todo)


def ingest(
    writer: tantivy.IndexWriter,
    documents: Iterable[Document | IngestError | IngestWarning],
    known: dict[str, str],
    *,
    chunk_chars: int,
    delete_missing: bool = False,
    progress: bool = True,
    workers: int | None = None,
    desc: str = "index",
) -> IngestReport:
    """Upsert `documents` through `writer` in one commit; returns what changed.

    known: doc_id → revision of what the index holds now (updated in place).
    A document whose id comes again later in the same run is replaced by the later one (the
    last wins) and each override is a warning naming both origins; the counts compare each
    id's final document with the index before the run, so a re-run of unchanged input reports
    0 changes and writes nothing (issue 9). Documents are queued in batches of
    INGEST_BATCH_DOCS ids; a copy still queued is replaced without being written.
    See `indexes.store.KnowledgeIndex.ingest` for the rest. Rolls back on any exception and
    always waits for the writer's merging threads (which consumes the writer).
    """
    from tqdm import tqdm

    report = IngestReport()
    analyser = _Analyser(chunk_chars, workers)
    before = dict(known)
    origins: dict[str, str] = {}  # doc_id → origin of the copy kept so far, in first-seen order
    batch: dict[str, tuple[Document, str]] = {}
    try:
        bar = tqdm(documents, unit="doc", file=sys.stderr,
                   disable=not progress or not sys.stderr.isatty(), desc=desc)
        for item in bar:
            if isinstance(item, IngestError):
                report.errors.append((item.where, item.reason))
                continue
            if isinstance(item, IngestWarning):
                report.warnings.append((item.where, item.reason))
                continue
            origin = item.origin or f"document {item.id!r}"
            earlier = origins.get(item.id)
            if earlier is not None:
                report.warnings.append((origin, f"duplicate id {item.id!r} overrides {earlier} "
                                                "(the last record with an id is indexed)"))
            origins[item.id] = origin
            batch.pop(item.id, None)  # a queued earlier copy is never written
            batch[item.id] = (item, document_revision(item))
            if len(batch) >= INGEST_BATCH_DOCS:
                report.chunks += _write(writer, analyser, batch, known)
                batch = {}
        report.chunks += _write(writer, analyser, batch, known)
        bar.close()
        for doc_id in origins:
            previous = before.get(doc_id)
            if previous is None:
                report.added += 1
            elif previous != known[doc_id]:
                report.updated += 1
            else:
                report.unchanged += 1
        if delete_missing:
            if report.errors:
                n = len(report.errors)
                report.warnings.append(
                    ("--delete-missing", f"not run because of {n} input error{'s' if n != 1 else ''}: "
                                         "no document was deleted"))
            else:
                for doc_id in sorted(set(before) - set(origins)):
                    writer.delete_documents_by_term("doc_id", doc_id)
                    report.deleted += 1
        writer.commit()
    except BaseException:
        writer.rollback()
        raise
    finally:
        analyser.close()
        writer.wait_merging_threads()
    return report
