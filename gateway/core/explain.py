"""Why a search answered what it did: the trace an admin's try reads.

Rationale: docs/design-notes.md, "gateway/core/explain.py".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from gateway.core.scope import EffectiveScope, allows
from indexes.analysis import QueryTerms, normalize, query_terms
from indexes.dense import HybridIndex
from indexes.relevance import Question
from indexes.synonyms import analysed
from indexes.types import NO_DIALS, Dials, Hit, MetaFilter, ServedIndex

__all__ = ["EXPLAIN", "Dropped", "Explain", "SearchTrace", "TermView", "analysis_of", "effective_dials", "explaining",
           "matched_terms", "synonym_terms", "trace"]

CANDIDATES_PER_RESULT = 5
"""Chunks an explanation search asks for per answer wanted (at least MIN_CANDIDATES)."""
MIN_CANDIDATES = 20
CANDIDATE_CHARS = 4000
"""Characters of each candidate chunk kept to find the query terms in (a chunk is at most
indexes' chunk_chars, 1,000 by default, plus its heading)."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """A chunk (or a hit) that is not in the answer: `reason` as the module doc lists; `by`:
    the document that took its place for 'one_per_document', else ''."""

    hit: Hit
    reason: str
    by: str = ""


@dataclass(slots=True)
class SearchTrace:
    """One scoped search as a try saw it.

    index: the index searched (a successor when one was set); scope: `EffectiveScope.summary()`;
    query: the normalized text searched; limit, floor (relevance, 0..1), where: as the wing asked;
    cache: 'hit' (the caller would be answered from memory), 'miss' or 'off';
    generation: the commit opstamp searched (None when unknown); stages_ms: stage → ms, in
    order; explain_ms: the explanation searches (not a stage of the caller's answer);
    kept: the hits returned, best first; dropped: what was left out and why;
    terms: hit id → the query terms found in its title or chunk (`matched_terms`), for the kept
        hits and the dropped ones; synonym_terms: hit id → (synonym found, the question's term
        it stands for) of the synonyms that fired (`synonym_terms`);
    heading: hit id → the chunk's section heading ('' when none).
    expansions: the owner's synonyms that fired, as (the question's term, the synonym added)
        pairs (`indexes.synonyms.analysed`); () when none did.

    The analysis view a try shows (the console and `kbgate try --json` render these as given;
    retrieval fills them, the console never recomputes them):
    analysis: the question's content words in order, each a `TermView` (weight in the
        relevance, how it was matched by the answer's hits); [] when not computed.
    cosine_line: the dense model's cosine line this search judged on, {"zero": float,
        "one": float, "source": "measured" | "config" | "model"}, or None on a lexical index.
    dials: the route's effective retrieval dials by name (e.g. "dense_share", "candidates",
        "rerank", "rerank_threshold", "neighbours"), as the search used them; {} when none.
    answered: how a hybrid index answered: 'hybrid', or 'lexical: <reason>' when the query
        embedding failed it (a deadline, the breaker, vectors not published yet); None on a
        lexical index.
    gap: the route's gap threshold and this question's verdict, {"threshold": float,
        "gap": bool, "reason": str}, or None where no gap rule applies (filled by the try,
        from the console's gap rule, not by the core).
    """

    index: str
    scope: dict[str, object]
    query: str
    limit: int
    floor: float
    where: MetaFilter | None
    cache: str = "off"
    generation: int | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    explain_ms: float = 0.0
    kept: list[Hit] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    terms: dict[str, list[str]] = field(default_factory=dict)
    synonym_terms: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    heading: dict[str, str] = field(default_factory=dict)
    expansions: tuple[tuple[str, str], ...] = ()
    analysis: list[TermView] = field(default_factory=list)
    cosine_line: dict[str, object] | None = None
    dials: dict[str, object] = field(default_factory=dict)
    gap: dict[str, object] | None = None
    answered: str | None = None


@dataclass(frozen=True, slots=True)
class TermView:
    """One content word of the question as a try shows it.

    word: the word as analysed (normalised, Simplified); weight: its share in the lexical
    relevance, 0..1 (the weights of a question sum to 1); matched: 'direct' (a kept hit holds
    the word), 'synonym' (a kept hit holds a synonym the owner gave for it: `via` names it), or
    'unmatched'."""

    word: str
    weight: float
    matched: str
    via: str = ""


@dataclass(slots=True)
class Explain:
    """What a try collects while the wing answers: one trace per scoped search, in order, and
    the hits a multi-route merge left out (route key, Dropped)."""

    successor: dict[str, str] = field(default_factory=dict)
    traces: list[SearchTrace] = field(default_factory=list)
    merged: list[tuple[object, Dropped]] = field(default_factory=list)

    def index_for(self, name: str) -> str:
        """The index to search for a scope on `name` (its successor when one is set)."""
        return self.successor.get(name, name)


EXPLAIN: ContextVar[Explain | None] = ContextVar("kbgate_explain", default=None)


@contextmanager
def explaining(ex: Explain) -> Iterator[Explain]:
    """Collect into `ex` every search made inside the block (this task and what it awaits)."""
    token = EXPLAIN.set(ex)
    try:
        yield ex
    finally:
        EXPLAIN.reset(token)


def matched_terms(query: str | QueryTerms, text: str) -> list[str]:
    """The terms of `query`'s analysis (or of the analysis itself) (`indexes.analysis.query_terms`: words, Latin words,
    bigrams, lone characters) found in `text` once both are normalized as the index folds
    them (`indexes.analysis.normalize`); in the analysis' order, each once. The excerpt finds
    terms the same way (`indexes.search.excerpt`)."""
    terms = query_terms(query) if isinstance(query, str) else query
    folded = normalize(text)
    out: list[str] = []
    for t in (*terms.words, *terms.latin, *terms.bigrams, *terms.chars):
        if t and t not in out and t in folded:
            out.append(t)
    return out


def synonym_terms(expansions: tuple[tuple[str, str], ...], text: str) -> list[tuple[str, str]]:
    """(synonym, the question's term) of each fired synonym (`SearchTrace.expansions`) found in
    `text` once normalized as the index folds it; each synonym once, in the expansions' order."""
    folded = normalize(text)
    out: list[tuple[str, str]] = []
    for term, syn in expansions:
        if syn in folded and all(syn != s for s, _ in out):
            out.append((syn, term))
    return out


def analysis_of(asked: Question, answer_texts: list[str]) -> list[TermView]:
    """The question's content words as the relevance judged them (`asked`: the index's own
    `KnowledgeIndex.question`), each with its share of the question's weight (0..1, summing to
    1) and how the answer's texts (titles and chunks, raw) hold it: 'direct' when one holds the
    word, else 'synonym' (via: the synonym found), else 'unmatched'."""
    total = asked.total
    found = [asked.matched(normalize(t)) for t in answer_texts]
    out: list[TermView] = []
    for i, u in enumerate(asked.units):
        how = [m[i][1] for m in found]
        weight = u.weight / total if total > 0 else 0.0
        if u.text in how:
            out.append(TermView(u.text, weight, "direct"))
        elif any(how):
            out.append(TermView(u.text, weight, "synonym", next(h for h in how if h)))
        else:
            out.append(TermView(u.text, weight, "unmatched"))
    return out


def trace(idx: ServedIndex, scope: EffectiveScope, query: str, limit: int, *, floor: float,
          where: MetaFilter | None, found: list[Hit], kept: list[Hit], took_ms: float, check_ms: float,
          generation: int | None, dials: Dials = NO_DIALS) -> SearchTrace:
    """The trace of one search: `found` the index's hits, `kept` those the floor (or the route's
    rerank threshold) and the scope re-check let through (the answer), timed `took_ms` /
    `check_ms`; `dials` the route's (`effective_dials`). Runs the explanation searches (module
    doc) on `idx` and fills the analysis from the index's own question (`KnowledgeIndex.question`);
    raises what `KnowledgeIndex.search` raises."""
    t = SearchTrace(idx.name, scope.summary(), query, limit, floor, where, generation=generation,
                    stages_ms={"index": took_ms, "floor_and_scope": check_ms}, kept=list(kept),
                    expansions=analysed(query, idx.synonyms).expansions, dials=effective_dials(idx, dials))
    t.cosine_line = idx.cosine_line().view() if isinstance(idx, HybridIndex) else None
    if isinstance(idx, HybridIndex):  # read first: the explanation searches below search it again
        outcome = idx.dense.last_outcome() or "hybrid"
        t.answered = "hybrid" if outcome == "hybrid" else f"lexical: {outcome.removeprefix('fallback:')}"
    started = time.perf_counter()
    asked = idx.question(query)

    def under_floor(h: Hit, text: str) -> str:
        return "floor" if any(how for _, how in asked.matched(normalize(text))) else "no_match"

    kept_ids = {h.id for h in kept}
    texts: dict[str, str] = {h.id: f"{h.title}\n{h.content}" for h in (*found, *kept)}
    threshold = dials.rerank_threshold
    for h in found:
        if h.id not in kept_ids:
            rerank = h.scores.rerank
            t.dropped.append(Dropped(h, "rerank_threshold" if threshold is not None and rerank is not None
                                     and rerank < threshold else under_floor(h, texts[h.id]) if h.relevance < floor
                                     else "scope"))
    wide = max(limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
    chunks = idx.search(query, wide, one_per_document=False, summary_chars=CANDIDATE_CHARS,
                        content_chars=CANDIDATE_CHARS)
    narrowed = None
    if where is not None:
        narrowed = {h.id for h in idx.search(query, wide, filter=scope.filter, one_per_document=False,
                                             summary_chars=0, content_chars=1, where=where)}
    answered = {h.doc_id: h for h in kept}
    seen = {h.doc_id for h in found}  # listed above (floor or scope), as its best chunk
    for c in chunks:
        texts[c.id] = f"{c.title}\n{c.content}"  # the candidate's text is the longer one
        got = answered.get(c.doc_id)
        if got is not None:
            if c.chunk == got.chunk:
                t.heading[got.id] = _heading(c)
            else:
                t.dropped.append(Dropped(c, "one_per_document", got.id))
            continue
        if c.doc_id in seen:
            continue  # a document not answered is listed once, by its best chunk
        seen.add(c.doc_id)
        if not allows(scope, c.path, c.dataset, True):
            t.dropped.append(Dropped(c, "outside_scope"))
        elif narrowed is not None and c.id not in narrowed:
            t.dropped.append(Dropped(c, "metadata_condition"))
        elif c.relevance < floor:
            t.dropped.append(Dropped(c, under_floor(c, texts[c.id])))
        else:
            t.dropped.append(Dropped(c, "limit"))
    plain = query_terms(query)
    for h in (*kept, *(d.hit for d in t.dropped)):
        t.terms[h.id] = matched_terms(plain, texts[h.id])
        t.synonym_terms[h.id] = synonym_terms(t.expansions, texts[h.id])
    t.analysis = analysis_of(asked, [texts[h.id] for h in kept])
    t.explain_ms = (time.perf_counter() - started) * 1000.0
    return t


def effective_dials(idx: ServedIndex, dials: Dials) -> dict[str, object]:
    """The retrieval dials a search of `idx` used, by name: the route's where it set one, else the
    index's setting. dense_share and candidates on a hybrid index (`dense_config`); rerank (on or
    off), its candidates and rerank_threshold where the index has a rerank stage (the candidates
    a lexical index's reranker takes are its `candidates`); neighbours always; `route`: the names
    the route set, in this order."""
    out: dict[str, object] = {}
    dense = getattr(idx, "dense_config", None)
    if dense is not None:
        total = dense.lexical_weight + dense.dense_weight
        out["dense_share"] = dials.dense_share if dials.dense_share is not None else \
            round(dense.dense_weight / total, 4) if total > 0 else 0.0
        out["candidates"] = dials.candidates or dense.candidates
    if idx.rerank is not None:
        out["rerank"] = dials.rerank is not False
        if dials.rerank is not False:
            out["rerank_candidates" if dense is not None else "candidates"] = \
                dials.candidates or idx.rerank.config.candidates
            out["rerank_threshold"] = dials.rerank_threshold
    out["neighbours"] = dials.neighbours
    out["route"] = [name for name in ("dense_share", "candidates", "rerank", "rerank_threshold")
                    if getattr(dials, name) is not None] + (["neighbours"] if dials.neighbours else [])
    return out


def _heading(chunk: Hit) -> str:
    """The section heading of a candidate chunk, '' when it has none."""
    return chunk.heading.strip()
