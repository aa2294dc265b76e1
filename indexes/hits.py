"""Running a built query on a searcher and shaping its results into `Hit`s.

Rationale: docs/design-notes.md, "indexes/hits.py".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import tantivy
from tantivy import DocAddress, Occur, Query

from . import publish_time
from .analysis import QueryTerms, normalize
from .documents import stored_str
from .metadata import decode
from .passages import Piece, passage, question_of_terms
from .relevance import Question
from .search import bounded, excerpt
from .types import DEFAULT_BOUNDS, CoverImage, Hit, Scores, SearchBounds

__all__ = ["CONTEXT_WINDOW_CHARS", "MAX_ROUNDS", "Collapsed", "Judge", "chunk_fold", "chunk_text", "collapse", "judge",
           "make_hit", "search_hits"]

Judge = Callable[[tantivy.Document], float]
"""judge(stored chunk) → its relevance 0..1 for the question searched (`judge`)."""

MAX_ROUNDS = 4
NO_SCORES = Scores()
FETCH_PER_RESULT = 4  # hits asked of Tantivy per result still wanted, in the first round
CONTEXT_WINDOW_CHARS = 400
"""Longest part of one further matching chunk in a result's content: its query-biased window
(`indexes.search.excerpt`), about a paragraph, so that the content shows the matching part of
several sections of a page rather than the start of one or two. Measured with make eval on
every set (300, 350, 400, 500, 600 and whole chunks; see the commit message): 400 is the
only value with no set or style below whole chunks."""


@dataclass(slots=True)
class Collapsed:
    """One document's part of a result list: its best chunk and further matching chunks.

    score: the best chunk's score. address: the best chunk. more: other matching chunks of
    the same document, best first (at most max_chunks_per_document - 1).
    """

    score: float
    address: DocAddress
    more: list[DocAddress] = field(default_factory=list)


def collapse(searcher: tantivy.Searcher, schema: tantivy.Schema, query: Query, limit: int,
             bounds: SearchBounds, min_score: float = 0.0) -> list[Collapsed]:
    """The best `limit` documents of `query`, best first, one `Collapsed` each.

    min_score: chunks scoring under it (BM25 points) are dropped before they are grouped
    (neither a result nor a further chunk of one).
    Loads no stored document (see the module docstring for the rounds and bounds).
    """
    found_by_key: dict[int, Collapsed] = {}
    budget = bounds.max_chunks_per_query
    keep_more = bounds.max_chunks_per_document - 1
    q = query
    for round_no in range(MAX_ROUNDS):
        wanted = limit - len(found_by_key)
        n = min(wanted * FETCH_PER_RESULT << round_no, budget)
        if n <= 0:
            break
        fetched = searcher.search(q, n, count=False).hits
        budget -= len(fetched)
        found = [(score, a) for score, a in fetched if score >= min_score]  # best first: a prefix
        keys = searcher.fast_field_values("doc_key", [a for _, a in found])
        for (score, address), key in zip(found, keys, strict=True):
            k = int(key or 0)
            seen = found_by_key.get(k)
            if seen is None:
                if len(found_by_key) < limit:
                    found_by_key[k] = Collapsed(float(score), address)
            elif len(seen.more) < keep_more:
                seen.more.append(address)
        if len(found_by_key) >= limit or len(fetched) < n or len(found) < len(fetched):
            break
        # A disjunction of term queries, not term_set_query: measured 0.25 vs 0.60 ms per
        # search excluding one document of 41k matching chunks.
        excluded = [(Occur.MustNot, Query.term_query(schema, "doc_key", k)) for k in found_by_key]
        q = Query.boolean_query([(Occur.Must, query), *excluded])
    return list(found_by_key.values())


def chunk_text(doc: tantivy.Document) -> str:
    """A chunk's heading line (when it has one) and its text."""
    text = stored_str(doc, "text") or ""
    heading = doc.get_first("heading") or ""
    return f"{heading}\n{text}" if heading else text


def chunk_fold(doc: tantivy.Document, folded: dict[str, str] | None = None) -> str:
    """A stored chunk's title, heading and text, folded for matching question words
    (`indexes.analysis.normalize`; the text's stored fold where the index kept one). folded: a
    memo of folded titles and headings (chunks of one page share them) kept by the caller."""
    memo = folded if folded is not None else {}
    head = f"{doc.get_first('title') or ''}\n{doc.get_first('heading') or ''}"
    fold = memo.get(head)
    if fold is None:
        fold = memo[head] = normalize(head)
    return f"{fold}\n{stored_str(doc, 'text_fold') or (stored_str(doc, 'text') or '').lower()}"


def judge(question: Question) -> Judge:
    """The lexical relevance of stored chunks for `question` (`indexes.relevance.Question.about`),
    for the chunks of one search (titles and headings are folded once)."""
    folded: dict[str, str] = {}
    return lambda doc: question.about(chunk_fold(doc, folded))


def search_hits(
    searcher: tantivy.Searcher,
    schema: tantivy.Schema,
    query: Query,
    terms: QueryTerms,
    limit: int,
    *,
    one_per_document: bool = True,
    summary_chars: int = 200,
    content_chars: int = 1500,
    bounds: SearchBounds = DEFAULT_BOUNDS,
    judge: Judge | None = None,
    floor: float = 0.0,
    asked: Question | None = None,
) -> list[Hit]:
    """The best `limit` hits of `query`, highest score first (see module docstring).

    limit > 0. terms: the analysed query (for excerpts). summary_chars / content_chars:
    bounds in characters of Hit.summary / Hit.content. Without one_per_document, the best
    chunks themselves (at most max_chunks_per_query), each with its own content only.
    judge: each loaded chunk's relevance (`judge`; None: 0.0); floor: relevance 0..1 under which
    a result's chunk is dropped, not replaced, and a further chunk is not appended (0: none).
    asked: the question the Summaries answer (`indexes.passages`; None: from `terms` alone).
    """
    rate: Judge = judge if judge is not None else (lambda _doc: 0.0)
    if not one_per_document:
        found = searcher.search(query, min(limit, bounds.max_chunks_per_query), count=False).hits
        loaded = ((float(score), searcher.doc(a)) for score, a in found)
        return [make_hit(score, doc, terms, summary_chars, content_chars, scores=Scores(bm25=score), relevance=rel,
                         asked=asked)
                for score, doc in loaded if (rel := rate(doc)) >= floor]

    def load(addresses: list[DocAddress]) -> Iterator[tantivy.Document]:
        docs = (searcher.doc(a) for a in addresses)  # lazily: only while the content has room
        return (d for d in docs if rate(d) >= floor) if floor > 0 else docs

    hits = []
    for c in collapse(searcher, schema, query, limit, bounds):
        doc = searcher.doc(c.address)
        rel = rate(doc)
        if rel >= floor:
            hits.append(make_hit(c.score, doc, terms, summary_chars, content_chars, load(c.more),
                                 scores=Scores(bm25=c.score), relevance=rel, asked=asked))
    return hits


def make_hit(score: float, doc: tantivy.Document, terms: QueryTerms, summary_chars: int,
             content_chars: int, context: Iterable[tantivy.Document] = (), *,
             scores: Scores = NO_SCORES, relevance: float = 0.0, asked: Question | None = None) -> Hit:
    """A Hit from the best chunk `doc`; `context`: further matching chunks of the same
    document (best first), appended to the content while `content_chars` allows (consumed
    only that far), each cut to its best-matching window of at most CONTEXT_WINDOW_CHARS.
    score: the last stage's raw score; scores / relevance: `Hit.scores` / `Hit.relevance`."""
    doc_id = str(doc.get_first("doc_id"))
    n = int(doc.get_first("chunk") or 0)
    text = stored_str(doc, "text") or ""
    content = chunk_text(doc)
    more = iter(context)
    pieces = [Piece(doc.get_first("heading") or "", text, stored_str(doc, "text_fold"))]
    while len(content) + 2 < content_chars:  # best first, until the bound
        extra = next(more, None)
        if extra is None:
            break
        pieces.append(Piece(extra.get_first("heading") or "", stored_str(extra, "text") or "",
                            stored_str(extra, "text_fold")))
        room = min(content_chars - len(content) - 2, CONTEXT_WINDOW_CHARS)
        more_text = chunk_text(extra)
        if len(more_text) > room:
            # A further chunk shows its best-matching window, as a Summary does, not its head.
            more_text = excerpt(stored_str(extra, "text") or "", terms, room,
                                folded=stored_str(extra, "text_fold"))
        content = f"{content}\n\n{more_text}"
    cover_url = doc.get_first("cover_url")
    return Hit(
        id=doc_id if doc.get_first("n_chunks") == 1 else f"{doc_id}#{n}",
        doc_id=doc_id,
        chunk=n,
        title=doc.get_first("title") or "",
        # No text_fold stored: text.lower() is the fold (or folding changed its length).
        summary=passage(pieces, asked if asked is not None else question_of_terms(terms.text), summary_chars),
        content=bounded(content, content_chars),
        score=float(score),
        url=doc.get_first("url") or None,
        publish_time=publish_time.stored(doc.get_first("publish_time")),  # never ms, never out of range
        cover_image=None if not cover_url else CoverImage(
            cover_url, doc.get_first("cover_height"), doc.get_first("cover_width")),
        path=doc.get_first("path") or "",
        dataset=doc.get_first("dataset") or "",
        revision=doc.get_first("revision") or "",
        metadata=decode(doc.get_first("metadata")),
        relevance=relevance,
        scores=scores,
        heading=doc.get_first("heading") or "",
    )
