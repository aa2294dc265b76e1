"""Hybrid search of one index: BM25 and nearest neighbours, fused (the reader's side).

Rationale: docs/design-notes.md, "indexes/dense/hybrid.py".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy
from tantivy import Occur, Query

from .. import relevance
from ..hits import chunk_fold
from ..relevance import Question
from ..types import DEFAULT_BOUNDS, NO_DIALS, Dials, Scores, SearchBounds
from .calibration import CosineLine, effective
from .config import DenseConfig
from .fusion import calibrated, mix, rrf
from .query import QueryEncoder
from .vectors import VectorSet, current_generation, load_current

__all__ = ["OUTCOMES", "DenseSearch", "DenseState", "Observe", "RECHECK_SECONDS", "Reorder", "outcome_of", "weights"]

log = logging.getLogger("kbgate.dense")
RECHECK_SECONDS = 0.5
Address = tuple[int, int]  # (segment_ord, doc) of a Tantivy DocAddress

# make_hit(score, doc, terms, summary_chars, content_chars, context) -> Hit (indexes.hits / store)
MakeHit = Callable[..., Any]

OUTCOMES = ("hybrid", "stale", "reloading", "timeout", "breaker_open", "error")
"""What became of one search of a hybrid index: `hybrid` (the vectors were used) or why it was
answered lexically: `stale` (no vectors of the Tantivy generation searched: not published
yet, or of another model), `reloading` (a reload overlapped the search), `timeout` (the
query embedding missed query_timeout_ms), `breaker_open`, `error` (the provider failed)."""

Reorder = Callable[[tantivy.Searcher, list[tuple[Address, float]], dict[Address, Any], MakeHit],
                  tuple[list[tuple[Address, float]], MakeHit] | None]
"""reorder(searcher, fused, address, make_hit) → (new fused order, make_hit to use) or None (keep
both): the optional rerank stage between the fusion and the collapse (`indexes.rerank.chunks`)."""

Observe = Callable[[str, str], None]
"""observe(index name, outcome): told of every search of a hybrid index (outcome in OUTCOMES),
in the searching thread; it must not block and never raises into the search."""


def outcome_of(counter: str) -> str:
    """The OUTCOMES entry of a `DenseSearch.counters` key ('fallback:error:http_503' → 'error')."""
    return counter.removeprefix("fallback:").split(":", 1)[0]


@dataclass(frozen=True, slots=True)
class DenseState:
    """The generation the Tantivy reader shows, and its vectors (None: none published yet)."""

    generation: int | None
    vectors: VectorSet | None


class DenseSearch:
    """Hybrid search for one index (see module doc). Thread-safe.

    index_folder: the index. config: its dense settings. encoder: its query encoder.
    clock: monotonic seconds. counters: this process's searches answered 'hybrid' and
    fallbacks by reason ('fallback:timeout', 'fallback:error:http_503', ...). observe: told of
    each search's outcome (`Observe`), e.g. to count it in /metrics across workers.
    """

    def __init__(self, index_folder: Path, config: DenseConfig, encoder: QueryEncoder,
                 clock: Callable[[], float] = time.monotonic, observe: Observe | None = None) -> None:
        self.folder = Path(index_folder)
        self.config = config
        self.encoder = encoder
        self._clock = clock
        self._lock = threading.Lock()
        self._state: DenseState | None = None
        self._last_check = 0.0
        self._warned: int | None = None
        self.counters: dict[str, int] = {}
        self._observe = observe
        self._last = threading.local()

    def last_outcome(self) -> str | None:
        """This thread's last search's outcome: 'hybrid', or 'fallback:<reason>' (None: none yet)."""
        return getattr(self._last, "value", None)

    # ---- generation tracking ----------------------------------------------

    def invalidate(self) -> None:
        """Before a Tantivy reload: searches starting now answer lexically until `reloaded`."""
        self._state = None

    def reloaded(self, generation: int | None) -> None:
        """After a Tantivy reload that showed commit `generation` (None: not pinned down)."""
        with self._lock:
            self._state = DenseState(generation, self._load(generation))
            self._last_check = self._clock()

    def _load(self, generation: int | None) -> VectorSet | None:
        if generation is None:
            return None
        cur = current_generation(self.folder)
        if cur is None or cur[0] != generation:
            return None
        vectors = load_current(self.folder)
        if vectors is None or vectors.generation != generation:
            return None
        if vectors.fingerprint != self.encoder.embedder.fingerprint:
            if self._warned != generation:  # once per generation, not at every re-check
                self._warned = generation
                log.warning("vectors of another model: answering lexically; run kbgate index add",
                            extra={"index": self.folder.name, "vectors": vectors.fingerprint,
                                   "configured": self.encoder.embedder.fingerprint})
            return None
        return vectors

    def _usable(self) -> DenseState | None:
        """The state, after re-checking CURRENT (at most every RECHECK_SECONDS) when this
        generation's vectors were missing."""
        state = self._state
        if state is None or state.vectors is not None or state.generation is None:
            return state
        now = self._clock()
        if now - self._last_check < RECHECK_SECONDS:
            return state
        with self._lock:
            if self._state is state:
                self._last_check = now
                vectors = self._load(state.generation)
                if vectors is not None:
                    self._state = DenseState(state.generation, vectors)
            return self._state

    def line(self) -> CosineLine:
        """The cosine line searches judge on now (`indexes.dense.calibration.effective`): the
        config's override, else the one measured for the vectors loaded, else the model's."""
        state = self._state
        return effective(self.config, state.vectors.line if state is not None and state.vectors is not None else None)

    def _count(self, what: str) -> None:
        self._last.value = what
        with self._lock:  # searches run in several threads at once
            self.counters[what] = self.counters.get(what, 0) + 1
        if self._observe is not None:
            try:
                self._observe(self.folder.name, outcome_of(what))
            except Exception:  # an observer never fails a search
                log.warning("hybrid outcome observer failed", exc_info=True)

    # ---- search ----------------------------------------------------------

    def search(self, index: tantivy.Index, lexical_query: Callable[[tantivy.Searcher], Query | None],
               query_text: str, terms: Any,
               filters: tuple[Query | None, Query | None], limit: int, *, one_per_document: bool,
               summary_chars: int, content_chars: int, make_hit: MakeHit,
               bounds: SearchBounds = DEFAULT_BOUNDS, reorder: Reorder | None = None,
               ideal: Callable[[tantivy.Searcher], float] | None = None,
               question: Callable[[tantivy.Searcher], Question] | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> list[Any] | None:
        """Fused hits, best first, or None: answer lexically instead (see module doc).

        lexical_query: builds the full BM25 query (scope filter included) for the searcher the
        search runs on (term statistics come from it), or None (no searchable term: the caller
        answers lexically, with nothing). query_text: the raw query
        (embedded). terms: analysed query (for excerpts). filters: (must, must_not) of the
        scope, as `indexes.search.filter_query` builds them. limit > 0. bounds: the index's
        per-query work bounds (BM25 candidates are at most max_chunks_per_query; context chunks
        per result at most max_chunks_per_document - 1). reorder: the rerank stage (`Reorder`).
        ideal: the query's `indexes.search.ideal_score` on a searcher (the lexical side of the
        "calibrated" fusion; None: 0). question: the query's `indexes.relevance.Question` on a
        searcher (each hit's lexical relevance; None: 0). floor: relevance 0..1 under which a
        chunk is dropped when the hits are shaped (when the rerank stage ran, its relevance is
        judged instead, after the hits are made: `gateway.core.retrieve`). Each hit carries
        Scores(bm25, dense, fused[, rerank]) and its relevance (`indexes.relevance.hybrid`).
        dials: a route's dense share and candidates override the config's (`weights`); with its
        rerank threshold the floor judges each chunk before the reranker too.
        """
        state = self._usable()
        if state is None or state.vectors is None:
            self._count("fallback:stale")
            return None
        searcher = index.searcher()
        if self._state is not state:  # a reload began after we read the state
            self._count("fallback:reloading")
            return None
        q = lexical_query(searcher)
        if q is None:
            return None
        pending = self.encoder.start(query_text)
        if pending.skipped:
            self._count(f"fallback:{pending.skipped}")
            return None
        k = dials.candidates or self.config.candidates
        lexical_weight, dense_weight = weights(self.config, dials.dense_share)
        fetch = min(max(k, limit * 4 if one_per_document else limit), bounds.max_chunks_per_query)
        lexical = [(_key(a), float(s), a) for s, a in searcher.search(q, fetch, count=False).hits]
        outcome = self.encoder.wait(pending)
        if outcome.vector is None:
            self._count(f"fallback:{outcome.reason}")
            return None
        neighbours = state.vectors.search(outcome.vector, k)
        dense = _resolve(searcher, index.schema, neighbours, filters)
        address: dict[Address, Any] = {key: a for key, _, a in lexical}
        address.update({key: a for key, _, a in dense})
        lex = [(key, s) for key, s, _ in lexical]
        den = [(key, s) for key, s, _ in dense]
        mass = ideal(searcher) if ideal is not None else 0.0
        cosine = dict(den)
        line = effective(self.config, state.vectors.line).pair
        if self.config.fusion == "rrf":
            fused = rrf(lex, den, k=self.config.rrf_k, lexical_weight=lexical_weight, dense_weight=dense_weight)
        elif self.config.fusion == "mix":
            fused = mix(lex, den, lexical_weight=lexical_weight, dense_weight=dense_weight)
        else:
            cosine.update(_cosines(searcher, state.vectors, outcome.vector,
                                   [(key, a) for key, _, a in lexical[:k] if key not in cosine]))
            fused = calibrated(lex[:k], cosine, ideal=mass, lexical_weight=lexical_weight,
                               dense_weight=dense_weight, line=line)
            fused += [(key, 0.0) for key, _ in lex[k:]]  # BM25's further chunks: context, in BM25 order
        dense_only = {key for key, _ in den} - {key for key, _ in lex}
        self._count("hybrid")
        bm25 = dict(lex)
        fused_of = dict(fused)

        def scores(key: Address) -> Scores:  # only for the chunks that become hits
            return Scores(bm25=bm25.get(key), dense=cosine.get(key), fused=fused_of[key])

        asked = question(searcher) if question is not None else Question(())
        folded: dict[str, str] = {}

        def judge(key: Address, doc: tantivy.Document) -> float:
            return relevance.hybrid(asked.about(chunk_fold(doc, folded)), cosine.get(key), line)

        reranked = reorder(searcher, fused, address, make_hit) if reorder is not None else None
        kept, make = reranked if reranked is not None else (fused, make_hit)
        return _pick(searcher, kept, address, dense_only, state.vectors, terms, limit, one_per_document,
                     summary_chars, content_chars, make, keep_more=max(bounds.max_chunks_per_document - 1, 0),
                     scores=scores, judge=judge, asked=asked,
                     floor=floor if reranked is None or dials.rerank_threshold is not None else 0.0)


def weights(config: DenseConfig, dense_share: float | None) -> tuple[float, float]:
    """(lexical_weight, dense_weight) of the fusion: the config's, or with a route's `dense_share`
    (0..1) their sum split (1 - share) : share (a fusion's order depends only on the ratio; the
    sum keeps the fused scores on the index's scale)."""
    if dense_share is None:
        return config.lexical_weight, config.dense_weight
    total = config.lexical_weight + config.dense_weight
    return total * (1.0 - dense_share), total * dense_share


def _cosines(searcher: tantivy.Searcher, vectors: VectorSet, query: Any,
             chunks: Sequence[tuple[Address, Any]]) -> dict[Address, float]:
    """The cosine of `query` (a unit vector) with the stored vector of each (key, Tantivy address)
    chunk that has one: the chunks' doc_key and chunk fast fields name their vectors (no stored
    document is read)."""
    if not chunks:
        return {}
    addresses = [a for _, a in chunks]
    at = zip(searcher.fast_field_values("doc_key", addresses), searcher.fast_field_values("chunk", addresses),
             strict=True)
    keys = vectors.keys_at([(int(dk or 0), int(n or 0)) for dk, n in at])
    found = [(key, vk) for (key, _), vk in zip(chunks, keys, strict=True) if vk is not None]
    if not found:
        return {}
    sims = vectors.vectors([vk for _, vk in found]) @ query
    return {key: float(sim) for (key, _), sim in zip(found, sims.tolist(), strict=True)}


def _key(address: Any) -> Address:
    return (int(address.segment_ord), int(address.doc))


def _resolve(searcher: tantivy.Searcher, schema: tantivy.Schema, neighbours: Sequence[tuple[str, str, float]],
             filters: tuple[Query | None, Query | None]) -> list[tuple[Address, float, Any]]:
    """The neighbours present in this searcher's commit and inside the scope, in neighbour
    order: (address key, cosine, address). One query, no stored document read: each
    chunk_id term scores a constant encoding its rank."""
    if not neighbours:
        return []
    n = len(neighbours)
    should = [(Occur.Should, Query.const_score_query(Query.term_query(schema, "chunk_id", cid), float(n - i)))
              for i, (cid, _, _) in enumerate(neighbours)]
    clauses: list[tuple[Occur, Query]] = [(Occur.Must, Query.boolean_query(should))]
    must, must_not = filters
    if must is not None:
        clauses.append((Occur.Must, must))
    if must_not is not None:
        clauses.append((Occur.MustNot, must_not))
    out = []
    for score, address in searcher.search(Query.boolean_query(clauses), n, count=False).hits:
        rank = n - int(round(float(score)))
        if 0 <= rank < n:
            out.append((rank, _key(address), neighbours[rank][2], address))
    out.sort(key=lambda r: r[0])
    return [(key, cos, address) for _, key, cos, address in out]


def _pick(searcher: tantivy.Searcher, fused: Sequence[tuple[Address, float]], address: dict[Address, Any],
          dense_only: set[Address], vectors: VectorSet, terms: Any, limit: int, one_per_document: bool,
          summary_chars: int, content_chars: int, make_hit: MakeHit, keep_more: int,
          scores: Callable[[Address], Scores], judge: Callable[[Address, tantivy.Document], float],
          floor: float, asked: Question | None = None) -> list[Any]:
    """Walk the fused order like a BM25 order (`indexes.hits`): chunks are grouped by document
    through the `doc_key` fast field (no stored document loaded to group them); the first
    chunk of each document becomes its hit and up to `keep_more` later ones its context, loaded
    lazily while the content has room. Stored chunks loaded: at most limit × (1 + keep_more),
    plus one per document dropped for a revision its vectors were not computed from or for a
    relevance under `floor`. scores(key): a chunk's Scores; judge(key, stored chunk): its relevance.
    A document whose first chunk is under `floor` is dropped (not replaced); a further chunk
    under it is not appended. asked: the question the Summaries answer (`indexes.passages`)."""
    order = [address[key] for key, _ in fused]
    doc_keys = searcher.fast_field_values("doc_key", order)
    groups: dict[int, tuple[float, Address, Any, list[tuple[Address, Any]]]] = {}
    for (key, score), a, dk in zip(fused, order, doc_keys, strict=True):
        group_key = int(dk or 0) if one_per_document else len(groups)
        seen = groups.get(group_key)
        if seen is None:
            groups[group_key] = (score, key, a, [])
        elif len(seen[3]) < keep_more:
            seen[3].append((key, a))
    hits: list[Any] = []
    for score, key, a, more in groups.values():
        if len(hits) == limit:
            break
        doc = searcher.doc(a)
        if key in dense_only and vectors.revision_of.get(str(doc.get_first("doc_id"))) != doc.get_first("revision"):
            continue  # a vector of another revision of this document: never trusted
        rel = judge(key, doc)
        if rel < floor:
            continue
        loaded = ((k, searcher.doc(m)) for k, m in more)  # lazily: only while the content has room
        context = (d for k, d in loaded if floor <= 0 or judge(k, d) >= floor)
        hits.append(make_hit(score, doc, terms, summary_chars, content_chars, context, scores=scores(key),
                             relevance=rel, asked=asked))
    return hits
