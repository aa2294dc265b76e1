"""Applying the rerank stage to a chunk order, before the one-per-document collapse.

Rationale: docs/design-notes.md, "indexes/rerank/chunks.py".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import tantivy
from tantivy import DocAddress, Occur, Query

from ..analysis import QueryTerms
from ..hits import FETCH_PER_RESULT, Judge, chunk_text, make_hit, search_hits
from ..relevance import Question
from ..types import DEFAULT_BOUNDS, Hit, Scores, SearchBounds
from .stage import RerankStage

__all__ = ["document_text", "rerank_fused", "reranked_hits", "with_rerank"]

K = TypeVar("K", bound=Hashable)
MakeHit = Callable[..., Any]


def document_text(doc: tantivy.Document) -> str:
    """What the reranker reads of one chunk: its document's title, then its heading and text."""
    title = doc.get_first("title") or ""
    body = chunk_text(doc)
    return f"{title}\n{body}" if title else body


def with_rerank(hit: Hit, relevance: float | None, lowest: float = 1.0) -> Hit:
    """`hit` with `scores.rerank` and `relevance` set to `relevance`; when None (a chunk past the
    reranker's candidates, which ranks after every reranked one) its own relevance capped at
    `lowest`, the lowest relevance the reranker gave, so relevance stays monotonic in the order
    (a merge by relevance keeps the reranked order)."""
    if relevance is None:
        return hit if hit.relevance <= lowest else dataclasses.replace(hit, relevance=lowest)
    return dataclasses.replace(hit, relevance=relevance, scores=dataclasses.replace(hit.scores, rerank=relevance))


def _ranked(scores: Sequence[float]) -> list[int]:
    """Positions of `scores`, best first; equal scores keep their order (a stable sort)."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def rerank_fused(stage: RerankStage, searcher: tantivy.Searcher, query_text: str, fused: Sequence[tuple[K, float]],
                 address: Mapping[K, Any], make: MakeHit,
                 candidates: int | None = None) -> tuple[list[tuple[K, float]], MakeHit] | None:
    """The fused chunk order (key, fused score) with its first `candidates` reranked, and a
    `make_hit` that sets their rerank scores; None: keep `fused` (the stage answered None).

    address: key → Tantivy DocAddress of every key in `fused`. make: `indexes.hits.make_hit`
    (or a compatible callable). candidates: a route's count (None: the stage's). Loads that
    many stored chunks.
    """
    head = list(fused[:candidates or stage.config.candidates])
    docs = [searcher.doc(address[key]) for key, _ in head]
    scores = stage.scores(query_text, [document_text(d) for d in docs])
    if scores is None:
        return None
    by_chunk = {(str(d.get_first("doc_id")), int(d.get_first("chunk") or 0)): s
                for d, s in zip(docs, scores, strict=True)}

    lowest = min(scores, default=1.0)

    def reranked_hit(*args: Any, **kwargs: Any) -> Any:
        hit = make(*args, **kwargs)
        return with_rerank(hit, by_chunk.get((hit.doc_id, hit.chunk)), lowest)

    return [head[i] for i in _ranked(scores)] + list(fused[len(head):]), reranked_hit


def reranked_hits(stage: RerankStage, searcher: tantivy.Searcher, schema: tantivy.Schema, query: Query,
                  query_text: str, terms: QueryTerms, limit: int, *, one_per_document: bool = True,
                  summary_chars: int = 200, content_chars: int = 1500,
                  bounds: SearchBounds = DEFAULT_BOUNDS, judge: Judge | None = None,
                  floor: float = 0.0, candidates: int | None = None,
                  floor_before: bool = False, asked: Question | None = None) -> tuple[list[Hit], bool]:
    """`indexes.hits.search_hits` with the rerank stage between the BM25 chunks and the
    collapse: (hits, True), or (search_hits' own hits, False) when the stage answered None.

    Same arguments as `search_hits`, plus query_text (the raw query, sent to the reranker).
    judge: each hit's lexical relevance (`indexes.hits.judge`), which the reranker's replaces
    where it scored the hit. floor: applied as `search_hits` applies it only when the
    stage answered None; a reranked answer's floor is judged on its relevance afterwards
    (`gateway.core.retrieve`), unless `floor_before` (a route's rerank threshold: the floor then
    judges each hit's lexical relevance, before the reranker's replaces it; not replaced).
    candidates: a route's count (None: the stage's). asked: the question the Summaries answer.
    Work: one Tantivy search of max(candidates, limit × FETCH_PER_RESULT) chunks (within
    bounds.max_chunks_per_query), `candidates` stored chunks loaded for their text, one rerank
    call; when those chunks hold fewer than `limit` documents, `search_hits` fills the rest
    with the documents seen excluded.
    """
    n = min(candidates or stage.config.candidates, bounds.max_chunks_per_query)
    fetch = min(max(n, limit * FETCH_PER_RESULT if one_per_document else limit), bounds.max_chunks_per_query)
    found = [(float(s), a) for s, a in searcher.search(query, fetch, count=False).hits]
    head = [searcher.doc(a) for _, a in found[:n]]
    scores = stage.scores(query_text, [document_text(d) for d in head])
    if scores is None:
        return search_hits(searcher, schema, query, terms, limit, one_per_document=one_per_document,
                           summary_chars=summary_chars, content_chars=content_chars, bounds=bounds,
                           judge=judge, floor=floor, asked=asked), False
    # (stage score, address, rerank score or None, loaded chunk or None), in the new order
    order: list[tuple[float, DocAddress, float | None, tantivy.Document | None]] = [
        (found[i][0], found[i][1], scores[i], head[i]) for i in _ranked(scores)]
    order += [(s, a, None, None) for s, a in found[len(head):]]

    def load(item: tuple[float, DocAddress, float | None, tantivy.Document | None]) -> tantivy.Document:
        return item[3] if item[3] is not None else searcher.doc(item[1])

    lowest = min(scores, default=1.0)

    def judged(score: float, doc: tantivy.Document) -> dict[str, Any]:
        return {"scores": Scores(bm25=score), "relevance": judge(doc) if judge is not None else 0.0, "asked": asked}

    if not one_per_document:
        return [with_rerank(h, item[2], lowest) for item in order[:limit] for doc in (load(item),)
                for h in (make_hit(item[0], doc, terms, summary_chars, content_chars, **judged(item[0], doc)),)
                if not floor_before or h.relevance >= floor], True
    keep_more = bounds.max_chunks_per_document - 1
    groups: dict[int, tuple[Any, list[Any]]] = {}
    for item, key in zip(order, searcher.fast_field_values("doc_key", [a for _, a, _, _ in order]), strict=True):
        k = int(key or 0)
        seen = groups.get(k)
        if seen is None:
            if len(groups) < limit:
                groups[k] = (item, [])
        elif len(seen[1]) < keep_more:
            seen[1].append(item)
    made = ((make_hit(best[0], doc, terms, summary_chars, content_chars, (load(m) for m in more),
                      **judged(best[0], doc)), best[2]) for best, more in groups.values() for doc in (load(best),))
    hits = [with_rerank(h, score, lowest) for h, score in made if not floor_before or h.relevance >= floor]
    if len(hits) < limit and len(found) == fetch:  # more documents past the chunks taken
        rest = Query.boolean_query([(Occur.Must, query),
                                    *((Occur.MustNot, Query.term_query(schema, "doc_key", k)) for k in groups)])
        hits += [with_rerank(h, None, lowest) for h in search_hits(
            searcher, schema, rest, terms, limit - len(hits), one_per_document=True, summary_chars=summary_chars,
            content_chars=content_chars, bounds=bounds, judge=judge, floor=floor, asked=asked)]
    return hits, True
