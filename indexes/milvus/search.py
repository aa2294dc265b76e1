"""A question's candidates from Milvus: kbgate's terms, one BM25 search per field, fused here.

Rationale: docs/design-notes.md, "indexes/milvus/search.py".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..analysis import QueryTerms
from ..search import DEFAULT_BOOSTS, Boosts
from ..synonyms import EXPANSION_WEIGHT
from .client import Collection

__all__ = ["Candidate", "candidates", "field_queries"]


@dataclass(slots=True)
class Candidate:
    """One document's part of the candidates: its chunks' ids, best first, and their scores."""

    doc_id: str
    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    @property
    def score(self) -> float:
        return self.scores[0]


def field_queries(terms: QueryTerms, boosts: Boosts = DEFAULT_BOOSTS,
                  common: frozenset[str] = frozenset()) -> Iterator[tuple[str, str, float, bool]]:
    """(field, whitespace-joined terms, weight, adds only) of each search a question makes. A
    common word or Latin word (`common`: in more than COMMON_TERM_RATIO of the documents, the
    rule of `indexes.search.query_plan`) selects no chunk on the body fields: its search only
    adds `boosts.common` of its score to chunks a rarer term found (unless every term is common)."""
    fields = (("words", terms.words, boosts.body_words), ("latin", terms.latin, boosts.body_latin),
              ("chars", (*terms.bigrams, *terms.chars), boosts.body_bigrams),
              ("titles", (*terms.words, *terms.latin, *terms.bigrams), boosts.title))
    for name, tokens, boost in fields:
        if boost <= 0:
            continue
        own = [t for t in tokens if t not in terms.expanded]
        added = [t for t in tokens if t in terms.expanded]
        rare = [t for t in own if t not in common] if name in ("words", "latin") else own
        if rare:
            yield name, " ".join(rare), boost, False
        if len(rare) < len(own):
            yield name, " ".join(t for t in own if t in common), boost * boosts.common, bool(rare)
        if added:
            yield name, " ".join(added), boost * EXPANSION_WEIGHT, False


def candidates(c: Collection, terms: QueryTerms, expr: str, fetch: int,
               boosts: Boosts = DEFAULT_BOOSTS, common: frozenset[str] = frozenset()) -> dict[str, float]:
    """chunk id → fused score of the best `fetch` chunks of each field search within `expr`."""
    scores: dict[str, float] = {}
    queries = sorted(field_queries(terms, boosts, common), key=lambda q: q[3])  # adding-only searches last
    for name, text, weight, adds_only in queries:
        found = c.read("search", c.chunks, data=[text], anns_field=f"{name}_bm25", limit=fetch, filter=expr,
                       output_fields=[], search_params={"metric_type": "BM25"})
        for hit in found[0] if found else ():
            key = str(hit["id"])
            if adds_only and key not in scores:
                continue
            scores[key] = scores.get(key, 0.0) + weight * abs(float(hit["distance"]))
    return scores


def grouped(scores: dict[str, float], keep_more: int) -> list[Candidate]:
    """Chunk scores grouped by document, best document first, each with its best chunk and up to
    `keep_more` further chunks (ids are '{doc_id}#{chunk}')."""
    out: dict[str, Candidate] = {}
    for key, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        doc_id = key.rpartition("#")[0]
        got = out.get(doc_id)
        if got is None:
            out[doc_id] = Candidate(doc_id, [key], [score])
        elif len(got.ids) <= keep_more:
            got.ids.append(key)
            got.scores.append(score)
    return list(out.values())
