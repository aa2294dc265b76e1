"""What the lexical relevance's domain weight reads from an index, counted so that no single
document can swing it (`indexes.relevance.domain`; the bound and its derivation are in
docs/search-quality.md, "One document moves a word's weight by little").

Rationale: docs/design-notes.md, "indexes/profile.py".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import tantivy
from tantivy import Occur, Query

from .analysis import CJK_RANGES
from .documents import stored_str
from .segmenter import jieba

__all__ = ["Profile", "SAMPLE_DOCUMENTS", "documents_with", "profile"]

SAMPLE_DOCUMENTS = 32
"""Documents whose middle chunk is read to measure L (one chunk each: a long document is one vote)."""
_BUCKET = 1.25
"""Chunk counts are read in buckets growing by this ratio (docs with more than k chunks, by
`doc_freq`): a document's term is 1 − (1 − q)^n, which a 25% error in n moves by less than 25%."""
_CJK_WORD = re.compile(f"[{CJK_RANGES}]+")



@dataclass(frozen=True, slots=True)
class Profile:
    """An index's shape for the domain weight: sizes ((chunks of a document, documents of about
    that many chunks), ...), words_per_chunk (L, the median CJK words of a sampled chunk),
    documents (all of them)."""

    sizes: tuple[tuple[float, int], ...]
    words_per_chunk: float
    documents: int

    def expected(self, background: float) -> float:
        """Documents expected to hold a word of background probability `background` (0 < p < 1)
        under general Chinese: Σ_d 1 − (1 − p)^(n_d × L), each document < 1 (module doc)."""
        if self.words_per_chunk <= 0 or not 0.0 < background < 1.0:
            return 0.0
        per_chunk = self.words_per_chunk * math.log1p(-background)
        return sum(count * -math.expm1(n * per_chunk) for n, count in self.sizes)


def documents_with(searcher: tantivy.Searcher, schema: tantivy.Schema, fields: tuple[str, ...], term: str) -> int:
    """Distinct documents (`doc_key`) with a chunk holding `term` in any of `fields`."""
    clauses = [(Occur.Should, Query.term_query(schema, f, term)) for f in fields]
    query = clauses[0][1] if len(clauses) == 1 else Query.boolean_query(clauses)
    return round(searcher.cardinality(query, "doc_key"))


def profile(searcher: tantivy.Searcher, schema: tantivy.Schema) -> Profile:
    """The `Profile` of the index `searcher` shows (module doc)."""
    documents = searcher.doc_freq("chunk", 0)  # one chunk 0 each
    if documents <= 0:
        return Profile((), 0.0, 0)
    sizes: list[tuple[float, int]] = []
    low, more = 1, documents  # `more` documents have more than low - 1 chunks
    while more > 0:
        high = max(low + 1, math.ceil(low * _BUCKET))
        beyond = searcher.doc_freq("chunk", high - 1)  # documents with at least `high` chunks
        if more > beyond:
            sizes.append((math.sqrt(low * (high - 1)), more - beyond))
        low, more = high, beyond
    return Profile(tuple(sizes), _words_per_chunk(searcher, schema, documents), documents)


def _words_per_chunk(searcher: tantivy.Searcher, schema: tantivy.Schema, documents: int) -> float:
    """The median CJK words of the middle chunk of up to SAMPLE_DOCUMENTS documents spread
    evenly over all of them ordered by `doc_key` (a hash of the id: two builds agree)."""
    firsts = [a for _, a in searcher.search(Query.term_query(schema, "chunk", 0), documents, count=False).hits]
    keys = sorted((int(k or 0), a) for k, a in zip(searcher.fast_field_values("doc_key", firsts), firsts, strict=True))
    picked = keys[::max(len(keys) // SAMPLE_DOCUMENTS, 1)][:SAMPLE_DOCUMENTS]
    middles: dict[int, tantivy.DocAddress] = {}  # doc_key → the address of its chunk to read (its first unless found)
    wanted: list[tuple[Occur, Query]] = []
    for key, first in picked:
        middles[key] = first
        n = int(searcher.doc(first).get_first("n_chunks") or 1)
        if n > 2:
            wanted.append((Occur.Should, Query.boolean_query([
                (Occur.Must, Query.term_query(schema, "doc_key", key)),
                (Occur.Must, Query.term_query(schema, "chunk", n // 2))])))
    if wanted:  # one search for every middle chunk
        found = [a for _, a in searcher.search(Query.boolean_query(wanted), len(wanted), count=False).hits]
        for value, spot in zip(searcher.fast_field_values("doc_key", found), found, strict=True):
            middles[int(value or 0)] = spot
    counts: list[int] = []
    for spot in middles.values():
        doc = searcher.doc(spot)
        text = f"{doc.get_first('heading') or ''}\n{stored_str(doc, 'text_fold') or stored_str(doc, 'text') or ''}"
        counts.append(sum(1 for token in jieba().cut(text) if _CJK_WORD.fullmatch(token)))
    counts.sort()
    return float(counts[(len(counts) - 1) // 2]) if counts else 0.0
