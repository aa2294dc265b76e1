"""The bm25s + rjieba baseline, on the same chunks as the index.

Rationale: docs/design-notes.md, "bench/baseline.py".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gateway.evaluation.evaluation import Bm25sBaseline
from indexes.ingest import chunk
from indexes.types import Document, Section

__all__ = ["Bm25sBaseline", "SOURCE", "as_chunk_documents"]

SOURCE = "gateway.evaluation.evaluation.Bm25sBaseline"


CHUNK_CHARS_ALL = 1_000_000
"""Chunk size handed to the baseline: larger than any chunk, so it never re-cuts one."""


def as_chunk_documents(documents: Iterable[Document]) -> Iterator[Document]:
    """One Document per chunk of each document (title kept, heading + text as the body)."""
    for doc in documents:
        for c in chunk(doc):
            yield Document(id=doc.id, title=doc.title, sections=(Section(c.heading, c.text),))
