"""Reading whole documents back from an index: by id, by tree path, and every revision.

An index stores one Tantivy document per chunk (`indexes.schema`); these functions find a
document's chunks by its `doc_id` term and put it back together. They take a searcher, so
a caller reads one consistent commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import tantivy
from tantivy import Occur, Query

from . import publish_time
from .metadata import decode
from .types import DocumentHead, StoredDocument

__all__ = ["chunks_of", "count_matches", "doc_id_at", "document_of", "heads", "holders", "read_document",
           "revisions", "stored_str"]


def stored_str(doc: Any, name: str) -> Any:
    """The first stored value of field `name`, with bytes fields decoded as UTF-8."""
    value = doc.get_first(name)
    return value.decode("utf-8") if isinstance(value, bytes) else value


def count_matches(searcher: tantivy.Searcher, query: Query) -> int:
    """How many chunks `query` matches (Tantivy's count collector)."""
    found: Any = searcher.search(query, 1, count=True)  # the stubs lack SearchResult.count
    return int(found.count or 0)


def chunks_of(searcher: tantivy.Searcher, schema: tantivy.Schema, doc_id: str) -> list[tantivy.Document]:
    """Every stored chunk of document `doc_id`, in chunk order; [] when there is none."""
    q = Query.term_query(schema, "doc_id", doc_id)
    count = count_matches(searcher, q)
    if not count:
        return []
    docs = [searcher.doc(a) for _, a in searcher.search(q, count).hits]
    return sorted(docs, key=lambda d: int(d.get_first("chunk") or 0))


def read_document(searcher: tantivy.Searcher, schema: tantivy.Schema, doc_id: str, *,
                  include_hidden: bool = False) -> StoredDocument | None:
    """The whole document `doc_id` reassembled from its chunks in order, or None.

    Hidden documents (qa_visible=False) read as None unless include_hidden.
    Text: each section heading then its body (overlaps removed), joined by newlines.
    """
    return document_of(chunks_of(searcher, schema, doc_id), doc_id, include_hidden=include_hidden)


def document_of(chunks: Sequence[Any], doc_id: str, *, include_hidden: bool = False) -> StoredDocument | None:
    """`read_document` of stored chunks in chunk order (anything with `get_first`, a Tantivy
    document or `indexes.milvus.rows.Row`)."""
    if not chunks:
        return None
    first = chunks[0]
    visible = first.get_first("qa_visible") == 1
    if not visible and not include_hidden:
        return None
    return StoredDocument(
        doc_id=doc_id,
        title=first.get_first("title") or "",
        text=joined_text(dict(enumerate(chunks)), range(len(chunks))),
        revision=first.get_first("revision") or "",
        url=first.get_first("url") or None,
        summary=stored_str(first, "summary") or None,
        publish_time=publish_time.stored(first.get_first("publish_time")),  # never ms, never out of range
        path=first.get_first("path") or "",
        dataset=first.get_first("dataset") or "",
        qa_visible=visible,
        metadata=decode(first.get_first("metadata")),
    )


def doc_id_at(searcher: tantivy.Searcher, schema: tantivy.Schema, path: str,
              datasets: tuple[str, ...] | None = None) -> str | None:
    """The id of a document whose tree path is exactly `path` (raw term), or None.

    datasets: only a document of one of these datasets (None: any). Two datasets may hold the
    same path (`indexes.ingest`, document identity): a scope's datasets pick the one it sees.
    Visibility is not checked here; callers read the document and check it.
    """
    parts = [(Occur.Must, Query.term_query(schema, "path", path)), (Occur.Must, Query.term_query(schema, "chunk", 0))]
    if datasets is not None:
        parts.append((Occur.Must, Query.boolean_query(
            [(Occur.Should, Query.term_query(schema, "dataset", d)) for d in datasets])))
    q = Query.boolean_query(parts)
    hits = searcher.search(q, 1).hits
    if not hits:
        return None
    return str(searcher.doc(hits[0][1]).get_first("doc_id"))


def revisions(searcher: tantivy.Searcher, schema: tantivy.Schema) -> dict[str, str]:
    """doc_id → revision for every document in the index (read from chunk 0)."""
    q = Query.term_query(schema, "chunk", 0)
    count = count_matches(searcher, q)
    if not count:
        return {}
    out: dict[str, str] = {}
    for _, address in searcher.search(q, count).hits:
        d = searcher.doc(address)
        out[str(d.get_first("doc_id"))] = str(d.get_first("revision"))
    return out


def holders(searcher: tantivy.Searcher, schema: tantivy.Schema) -> dict[str, tuple[str, str]]:
    """doc_id → (dataset, source), each '' when none, for every document in the index (read
    from chunk 0): what `indexes.writer.ingest` checks a document against before it replaces one."""
    q = Query.term_query(schema, "chunk", 0)
    count = count_matches(searcher, q)
    if not count:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for _, address in searcher.search(q, count).hits:
        d = searcher.doc(address)
        out[str(d.get_first("doc_id"))] = (str(d.get_first("dataset") or ""), str(d.get_first("source") or ""))
    return out


def heads(searcher: tantivy.Searcher, schema: tantivy.Schema, ids: Iterable[str]) -> dict[str, DocumentHead]:
    """doc_id → DocumentHead of each of `ids` the index holds (read from its chunk 0; one term
    query per id, so a change set costs what it touches, not the size of the index)."""
    out: dict[str, DocumentHead] = {}
    first = Query.term_query(schema, "chunk", 0)
    for doc_id in dict.fromkeys(ids):
        q = Query.boolean_query([(Occur.Must, Query.term_query(schema, "doc_id", doc_id)), (Occur.Must, first)])
        found = searcher.search(q, 1).hits
        if found:
            d = searcher.doc(found[0][1])
            out[doc_id] = DocumentHead(doc_id, str(d.get_first("revision") or ""), str(d.get_first("dataset") or ""),
                                       str(d.get_first("path") or ""), str(d.get_first("source") or ""))
    return out


def joined_text(numbered: Mapping[int, Any], chunks: Iterable[int]) -> str:
    """The text of `chunks` (numbers into `numbered`: chunk number → stored chunk) in document
    order: a heading where its section starts (or where the text starts), a chunk's overlap
    dropped after the chunk it overlaps; parts joined by newlines."""
    parts: list[str] = []
    section, previous = None, None
    for c in sorted(chunks):
        doc = numbered[c]
        text = stored_str(doc, "text") or ""
        body = text[doc.get_first("overlap") or 0:] if previous == c - 1 else text
        if doc.get_first("section") != section or previous != c - 1:
            section = doc.get_first("section")
            heading = doc.get_first("heading")
            if heading:
                parts.append(str(heading))
            parts.append(body)
        else:
            parts[-1] += body
        previous = c
    return "\n".join(p for p in parts if p)
