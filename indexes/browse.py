"""An index's documents and chunks as an owner browses them, and a stored document put back
into the `Document` the writer takes (to change only its visibility).

Rationale: docs/design-notes.md, "indexes/browse.py".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import tantivy
from tantivy import Occur, Query

from . import publish_time
from .documents import chunks_of, count_matches, holders, stored_str
from .metadata import decode
from .records import PAGE
from .types import ChunkView, CoverImage, Document, DocumentRow, Section

__all__ = ["Browsing", "ChunkView", "DocumentRow", "as_document", "chunk_views", "document_from", "views_of",
           "count_hidden", "document_rows"]


def _first_chunks(searcher: tantivy.Searcher, schema: tantivy.Schema, hidden_only: bool = False) -> Query:
    first = Query.term_query(schema, "chunk", 0)
    if not hidden_only:
        return first
    return Query.boolean_query([(Occur.Must, first), (Occur.Must, Query.term_query(schema, "qa_visible", 0))])


def document_rows(searcher: tantivy.Searcher, schema: tantivy.Schema) -> list[DocumentRow]:
    """Every document of the index, sorted by id."""
    q = _first_chunks(searcher, schema)
    count = count_matches(searcher, q)
    rows = []
    for _, address in (searcher.search(q, count).hits if count else []):
        d = searcher.doc(address)
        rows.append(DocumentRow(str(d.get_first("doc_id")), str(d.get_first("title") or ""),
                                str(d.get_first("path") or ""), str(d.get_first("dataset") or ""),
                                str(d.get_first("revision") or ""), d.get_first("qa_visible") == 1,
                                int(d.get_first("n_chunks") or 1)))
    return sorted(rows, key=lambda r: r.doc_id)


def count_hidden(searcher: tantivy.Searcher, schema: tantivy.Schema) -> int:
    """How many documents of the index are hidden (qa_visible=0: disabled, or hidden by their source)."""
    return count_matches(searcher, _first_chunks(searcher, schema, hidden_only=True))


def _page(chunk: Any) -> int | None:
    value = dict(decode(chunk.get_first("metadata"))).get(PAGE)
    return value if isinstance(value, int) else None


def chunk_views(searcher: tantivy.Searcher, schema: tantivy.Schema, doc_id: str) -> list[ChunkView]:
    """The chunks of `doc_id` in order; [] when the index holds no such document."""
    return views_of(chunks_of(searcher, schema, doc_id))


def views_of(chunks: Sequence[Any]) -> list[ChunkView]:
    """`chunk_views` of stored chunks in chunk order (anything with `get_first`)."""
    return [ChunkView(int(c.get_first("chunk") or 0), int(c.get_first("section") or 0),
                      str(c.get_first("heading") or ""), str(stored_str(c, "text") or ""),
                      int(c.get_first("overlap") or 0), _page(c))
            for c in chunks]


def as_document(searcher: tantivy.Searcher, schema: tantivy.Schema, doc_id: str, *,
                qa_visible: bool | None = None) -> Document | None:
    """The stored document `doc_id` as the `Document` the writer takes, or None when absent:
    its sections put back from its chunks (overlaps removed), its metadata, cover, url,
    summary, publish_time, path, dataset and `source` as stored. qa_visible: the visibility to
    give it (None: as stored). Written back unchanged it has the stored revision; the section
    heading trails are not stored (`indexes.schema`), so a rewrite analyses each chunk under its
    own heading only."""
    return document_from(chunks_of(searcher, schema, doc_id), doc_id, qa_visible=qa_visible)


def document_from(chunks: Sequence[Any], doc_id: str, *, qa_visible: bool | None = None) -> Document | None:
    """`as_document` of stored chunks in chunk order (anything with `get_first`)."""
    if not chunks:
        return None
    first = chunks[0]
    sections: list[Section] = []
    current = None
    paged = False
    for c in chunks:
        body = (stored_str(c, "text") or "")[c.get_first("overlap") or 0:]
        page = _page(c)
        paged = paged or page is not None
        if c.get_first("section") != current:
            current = c.get_first("section")
            sections.append(Section(str(c.get_first("heading") or ""), body, "", page))
        else:
            sections[-1] = dataclasses.replace(sections[-1], text=sections[-1].text + body)
    meta = decode(first.get_first("metadata"))
    if paged:  # the page is each chunk's own metadata, not the document's
        meta = tuple((n, v) for n, v in meta if n != PAGE)
    cover_url = first.get_first("cover_url")
    cover = (CoverImage(str(cover_url), first.get_first("cover_height"), first.get_first("cover_width"))
             if cover_url else None)
    visible = first.get_first("qa_visible") == 1 if qa_visible is None else qa_visible
    return Document(doc_id, str(first.get_first("title") or ""), tuple(sections), url=first.get_first("url") or None,
                    summary=stored_str(first, "summary") or None,
                    publish_time=publish_time.stored(first.get_first("publish_time")),
                    cover_image=cover, path=str(first.get_first("path") or ""),
                    dataset=str(first.get_first("dataset") or ""), qa_visible=visible, metadata=meta,
                    origin=doc_id, source=str(stored_str(first, "source") or ""))


class Browsing:
    """The owner's view of a Tantivy index, each from one consistent commit (`reader()`, which
    the index class provides): mixed into `indexes.store.KnowledgeIndex`, so the console and sync
    ask the index (`indexes.types.ServedIndex`), never a searcher."""

    def reader(self) -> tuple[tantivy.Searcher, tantivy.Schema]:
        raise NotImplementedError

    def document_rows(self) -> list[DocumentRow]:
        """Every document, hidden ones included (`document_rows`)."""
        return document_rows(*self.reader())

    def hidden_count(self) -> int:
        """How many documents are hidden (qa_visible=0)."""
        return count_hidden(*self.reader())

    def chunk_views(self, doc_id: str) -> list[ChunkView]:
        """The stored chunks of `doc_id` in order ([] when absent)."""
        return chunk_views(*self.reader(), doc_id)

    def as_document(self, doc_id: str, *, qa_visible: bool | None = None) -> Document | None:
        """`as_document` on the current commit."""
        return as_document(*self.reader(), doc_id, qa_visible=qa_visible)

    def holders(self) -> dict[str, tuple[str, str]]:
        """doc_id → (dataset, source) of every document (`indexes.documents.holders`)."""
        return holders(*self.reader())
