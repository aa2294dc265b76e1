"""Running a built query on a searcher and shaping its results into `Hit`s.

One Tantivy document per chunk: with `one_per_document` the best chunk of each document
becomes the Hit, and further matching chunks of that document (best first) are appended to
its content (the Volcengine `KnowledgeContent`) while its bound allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import tantivy
from tantivy import Query

from .analysis import QueryTerms
from .documents import stored_str
from .search import bounded, excerpt
from .types import CoverImage, Hit

__all__ = ["chunk_text", "make_hit", "search_hits"]


def chunk_text(doc: tantivy.Document) -> str:
    """A chunk's heading line (when it has one) and its text."""
    text = stored_str(doc, "text") or ""
    heading = doc.get_first("heading") or ""
    return f"{heading}\n{text}" if heading else text


def search_hits(
    searcher: tantivy.Searcher,
    query: Query,
    terms: QueryTerms,
    limit: int,
    *,
    one_per_document: bool = True,
    summary_chars: int = 200,
    content_chars: int = 1500,
) -> list[Hit]:
    """The best `limit` hits of `query`, highest score first (see module docstring).

    limit > 0. terms: the analysed query (for excerpts). summary_chars / content_chars:
    bounds in characters of Hit.summary / Hit.content.
    """
    fetch = limit * 4 if one_per_document else limit
    while True:
        found = searcher.search(query, fetch).hits
        picked: list[tuple[float, tantivy.Document]] = []
        # Other matching chunks of a picked document, best first: they become the
        # "context" of its KnowledgeContent when one result per document is kept.
        more: dict[str, list[tantivy.Document]] = {}
        for score, address in found:
            doc = searcher.doc(address)
            doc_id = str(doc.get_first("doc_id"))
            if one_per_document:
                if doc_id in more:
                    more[doc_id].append(doc)
                    continue
                more[doc_id] = []
            if len(picked) < limit:
                picked.append((score, doc))
        if len(picked) == limit or len(found) < fetch or fetch >= 10_000:
            break
        fetch *= 4
    return [
        make_hit(score, doc, terms, summary_chars, content_chars,
                 more.get(str(doc.get_first("doc_id")), ()))
        for score, doc in picked
    ]


def make_hit(score: float, doc: tantivy.Document, terms: QueryTerms, summary_chars: int,
             content_chars: int, context: Sequence[tantivy.Document] = ()) -> Hit:
    """A Hit from the best chunk `doc`; `context`: further matching chunks of the same
    document (best first), appended to the content while `content_chars` allows."""
    doc_id = str(doc.get_first("doc_id"))
    n = int(doc.get_first("chunk") or 0)
    text = stored_str(doc, "text") or ""
    content = chunk_text(doc)
    for extra in context:  # best first, until the bound (the last one may be cut)
        if len(content) + 2 >= content_chars:
            break
        content = f"{content}\n\n{chunk_text(extra)}"
    cover_url = doc.get_first("cover_url")
    return Hit(
        id=doc_id if doc.get_first("n_chunks") == 1 else f"{doc_id}#{n}",
        doc_id=doc_id,
        chunk=n,
        title=doc.get_first("title") or "",
        # No text_fold stored: the text is its own fold (or folding changed its length).
        summary=excerpt(text, terms, summary_chars, folded=stored_str(doc, "text_fold") or text),
        content=bounded(content, content_chars),
        score=float(score),
        url=doc.get_first("url") or None,
        publish_time=doc.get_first("publish_time"),
        cover_image=None if not cover_url else CoverImage(
            cover_url, doc.get_first("cover_height"), doc.get_first("cover_width")),
        path=doc.get_first("path") or "",
        dataset=doc.get_first("dataset") or "",
        revision=doc.get_first("revision") or "",
    )
