"""The writer's analysis of documents into Tantivy documents: in this process, or pipelined
through a pool of worker processes (`Analyser`, used by `indexes.writer.ingest`).

Rationale: docs/design-notes.md, "indexes/analyser.py".
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import orjson
import tantivy

from .records import chunk_fields
from .types import CoverImage, Document, Section

__all__ = ["PARALLEL_MIN_DOCS", "Analyser", "analyse_batch"]

PARALLEL_MIN_DOCS = 2000  # below this, worker start-up (~1.7 s, rjieba load) costs more than it saves
PENDING_PER_WORKER = 2  # batches queued per worker process beyond the one it analyses


Packed = tuple[Any, ...]
"""A Document as a plain tuple (`_pack`): pickled by C code, where a slotted dataclass
pickles field by field in Python (about 25 µs to send a document, 35 µs to receive it)."""


def _pack(doc: Document) -> Packed:
    cover = doc.cover_image
    return (doc.id, doc.title, tuple((s.heading, s.text, s.trail, s.page) for s in doc.sections), doc.url,
            doc.summary, doc.publish_time, None if cover is None else (cover.url, cover.height, cover.width),
            doc.path, doc.dataset, doc.qa_visible, doc.metadata, doc.source)


def _unpack(p: Packed) -> Document:
    cover = None if p[6] is None else CoverImage(*p[6])
    return Document(p[0], p[1], tuple(Section(*s) for s in p[2]), p[3], p[4], p[5], cover, p[7], p[8], p[9], p[10],
                    source=p[11])


def analyse_batch(docs: list[Packed], revisions: list[str], chunk_chars: int) -> tuple[int, str]:
    """`chunk_fields` of every document of a batch: (number of chunks, their Tantivy JSON
    documents joined by newlines). JSON, which `IndexWriter.add_json` parses in Rust, is the
    cheapest form to send back and to add: no Python object per field on the writer's side
    (orjson escapes newlines inside strings, so a newline separates documents)."""
    gc_was = gc.isenabled()
    gc.disable()  # the analysis makes no reference cycles; collections only cost time here
    try:
        fields = [f for p, rev in zip(docs, revisions, strict=True) for f in chunk_fields(_unpack(p), rev, chunk_chars)]
        return len(fields), b"\n".join(map(orjson.dumps, fields)).decode("utf-8")
    finally:
        if gc_was:
            gc.enable()


class Analyser:
    """Turns batches of (Document, revision) into tantivy documents added to a writer.

    In this process while few documents have been seen; from PARALLEL_MIN_DOCS on, in a
    pool of `workers` spawned processes (spawn, not fork: the writer runs threads), with up
    to PENDING_PER_WORKER batches per worker queued ahead. Batches reach the writer in the
    order they were given, each preceded by its deletes (a Tantivy delete only affects the
    documents added before it).
    """

    def __init__(self, writer: tantivy.IndexWriter, chunk_chars: int, workers: int | None) -> None:
        self.writer = writer
        self.chunk_chars = chunk_chars
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.seen = 0
        self.added = 0
        self.pool: ProcessPoolExecutor | None = None
        # (deletes, documents, revisions, the analysis in a worker), in the order given
        self.pending: deque[tuple[list[str], list[Packed], list[str], Future[tuple[int, str]]]] = deque()

    def add(self, batch: list[tuple[Document, str]], deletes: list[str]) -> None:
        """Delete the ids `deletes`, then analyse `batch` and add its chunks, in this order
        relative to every earlier call; the work may finish in a later call or in `finish`."""
        self.seen += len(batch)
        if self.pool is None and self.workers > 1 and self.seen > PARALLEL_MIN_DOCS:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        docs = [_pack(d) for d, _ in batch]
        revisions = [r for _, r in batch]
        if self.pool is not None:
            try:
                future = self.pool.submit(analyse_batch, docs, revisions, self.chunk_chars)
            except BrokenProcessPool:
                self._in_process_after_failure()
            else:
                self.pending.append((deletes, docs, revisions, future))
                while len(self.pending) > self.workers * (1 + PENDING_PER_WORKER):
                    self._write_oldest()
                return
        self._write(deletes, analyse_batch(docs, revisions, self.chunk_chars))

    def finish(self) -> int:
        """Write every queued batch; returns the number of chunks added in all."""
        while self.pending:
            self._write_oldest()
        return self.added

    def _write_oldest(self) -> None:
        """Write the oldest queued batch; when the worker processes failed, every queued
        batch is redone in this process instead."""
        deletes, _, _, future = self.pending[0]
        try:
            fields = future.result()
        except BrokenProcessPool:
            self._in_process_after_failure()
            return
        self.pending.popleft()
        self._write(deletes, fields)

    def _in_process_after_failure(self) -> None:
        """Redo the queued batches in this process, in order, and stop using workers (e.g. a
        script without an `if __name__ == "__main__":` guard, re-run by spawn)."""
        print("kbgate: analysis worker processes failed; indexing in this process", file=sys.stderr)
        queued = list(self.pending)
        self.pending.clear()
        self.close()
        self.workers = 1
        for deletes, docs, revisions, _ in queued:
            self._write(deletes, analyse_batch(docs, revisions, self.chunk_chars))

    def _write(self, deletes: list[str], analysed: tuple[int, str]) -> None:
        for doc_id in deletes:
            self.writer.delete_documents_by_term("doc_id", doc_id)
        count, json_docs = analysed
        if count:
            add = self.writer.add_json
            for doc in json_docs.split("\n"):
                add(doc)
        self.added += count

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None
