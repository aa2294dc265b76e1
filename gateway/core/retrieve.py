"""The one scoped retrieval every caller uses: search inside an effective scope, read one document of it.

Rationale: docs/design-notes.md, "gateway/core/retrieve.py".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Generic, Protocol, TypeVar

from anyio import to_thread

from gateway.core.answers import AnswerCache, AnswerKey, normalize_query, where_key
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import Asker, SearchAnswered, Served
from gateway.core.explain import EXPLAIN, Dropped, Explain, trace
from gateway.core.scope import EffectiveScope, allows
from indexes import relevance
from indexes.errors import IndexStoreError, is_engine_panic
from indexes.safe_text import clean_hit, clean_stored
from indexes.types import NO_DIALS, Dials, Hit, MetaFilter, ServedIndex, StoredDocument

log = logging.getLogger("kbgate.retrieve")

K = TypeVar("K")
_INDEX_ERRORS = (IndexStoreError, OSError, ValueError)


@contextmanager
def _index_calls(scope: EffectiveScope) -> Iterator[None]:
    """Calls into the scope's index: one that cannot be opened, searched or read (the index
    layer's errors, an OS or value error from Tantivy, or a panic of its Rust code: a segment
    damaged in place) raises DependencyUnavailable('index_unavailable') instead."""
    try:
        yield
    except BaseException as exc:
        if not (isinstance(exc, _INDEX_ERRORS) or is_engine_panic(exc)):
            raise
        raise _unavailable(scope) from None


class Indexes(Protocol):
    """Where indexes come from (gateway.core.runtime.Runtime): `index(name)` opens one
    (reloaded to its newest commit) or raises DependencyUnavailable('index_unavailable');
    `answers()` is the answer cache to use, or None (off); `answered(event)` publishes what a
    caller's question got (`SearchAnswered`), never raising."""

    def index(self, name: str) -> ServedIndex: ...

    def answers(self) -> AnswerCache | None: ...

    def answered(self, event: SearchAnswered) -> None: ...


@dataclass(frozen=True, slots=True)
class Searched:
    """The hits of one scoped search, best score first; how long the index took (ms; the
    lookup alone when cached); the index generation searched when it was asked for, else None;
    cached: answered from the answer cache."""

    hits: list[Hit]
    took_ms: float
    generation: int | None = None
    cached: bool = False


@dataclass(frozen=True, slots=True)
class Options:
    """What one search asks besides its question and scope: at most `limit` hits; Summary and
    content bounds in characters; one hit per document or not; the route's relevance floor
    (0..1); the index generation wanted or not; metadata conditions; the route's dials."""

    limit: int
    summary_chars: int
    content_chars: int
    one_per_document: bool = True
    floor: float = 0.0
    with_generation: bool = False
    where: MetaFilter | None = None
    dials: Dials = NO_DIALS


@dataclass(frozen=True, slots=True)
class Target(Generic[K]):
    """One scope of a search over several: `key` names it for the caller (a route, say),
    `floor` is that route's relevance floor (0..1), `dials` its retrieval dials."""

    key: K
    scope: EffectiveScope
    floor: float = 0.0
    dials: Dials = NO_DIALS


@dataclass(frozen=True, slots=True)
class Merged(Generic[K]):
    """A search over several scopes: (target key, hit) highest relevance first, one per
    (index, document); `failed` holds the keys whose index could not be searched."""

    hits: list[tuple[K, Hit]]
    failed: list[K]


def _unavailable(scope: EffectiveScope) -> DependencyUnavailable:
    log.warning("index failed", extra={"index": scope.index}, exc_info=True)
    return DependencyUnavailable("index_unavailable", f"index {scope.index!r} is not available")


async def search(indexes: Indexes, scope: EffectiveScope, query: str, limit: int, *, summary_chars: int,
                 content_chars: int, one_per_document: bool = True, floor: float = 0.0,
                 with_generation: bool = False, where: MetaFilter | None = None,
                 asker: Asker | None = None, dials: Dials = NO_DIALS) -> Searched:
    """Best hits for `query` inside `scope` (at most `limit`, best first), from the answer
    cache when it holds them (module doc). With `asker` (who asks, from the wing), what the
    caller got is published as one `SearchAnswered` (`Indexes.answered`), cached or not.
    A coroutine: an index whose search may wait
    (`KnowledgeIndex.search_may_wait`: hybrid) is searched in a worker thread, a lexical one
    inline (module doc).

    query: raw user text (searched with its whitespace normalized). summary_chars /
    content_chars: bounds of Hit.summary / Hit.content in characters. one_per_document: only
    the best chunk of each document. floor: the route's relevance floor, 0..1: hits whose
    relevance is under it are dropped (before one-per-document shaping), never replaced.
    with_generation: also give the index generation (a scope revision covers it).
    where: metadata conditions that narrow the scope further (never widen it: they are one
    more filter of the same query, so `limit` is filled from documents that match them);
    check each with `indexes.metadata.condition_problem` first. dials: the route's retrieval
    dials (`indexes.types.Dials`): they override the index's settings for this search, and a
    rerank threshold judges the reranker's score apart from the floor. took_ms counts the search
    alone (a thread's queueing included). Each hit's `relevance` is final (the reranker's
    where one ran). Raises DependencyUnavailable.

    While an admin's try explains (`gateway.core.explain.EXPLAIN` set) the answer is computed
    the same way, the cache only peeked at and never filled, and a trace is appended.
    """
    opts = Options(limit, dials.summary_chars or summary_chars,  # a route's budget wins over the caller's
                   content_chars, one_per_document, floor, with_generation, where, dials)
    ex = EXPLAIN.get()
    if ex is not None:
        return await _explained(indexes, ex, scope, query, opts)
    idx = indexes.index(scope.index)
    text = normalize_query(query)
    cache = indexes.answers()
    label = idx.generation
    incarnation = idx.incarnation  # read before the search, as the label (KnowledgeIndex.incarnation)
    if cache is not None and label is not None:
        started = time.perf_counter()
        hits = cache.get(_key(scope, label, text, opts, incarnation))
        if hits is not None:
            if asker is not None:
                _answered(indexes, asker, query, (scope.index,), [(scope.index, h) for h in hits])
            return Searched(hits, (time.perf_counter() - started) * 1000.0, label if with_generation else None,
                            cached=True)
    run = partial(_search, idx, scope, text, opts)
    found, reusable = await to_thread.run_sync(run) if idx.search_may_wait else run()
    if cache is not None and reusable is not None:
        cache.put(_key(scope, reusable, text, opts, incarnation), found.hits)
    if asker is not None:
        _answered(indexes, asker, query, (scope.index,), [(scope.index, h) for h in found.hits])
    return found


async def _explained(indexes: Indexes, ex: Explain, scope: EffectiveScope, query: str, opts: Options) -> Searched:
    """`search` for a try (gateway.core.explain): the same `_search`, never from the cache nor
    into it; the cache's outcome is peeked at (`AnswerCache.holds`) without being counted."""
    idx = indexes.index(ex.index_for(scope.index))
    text = normalize_query(query)
    cache = indexes.answers()
    label = idx.generation
    outcome = "off"
    if cache is not None:
        key = _key(scope, label, text, opts, idx.incarnation) if label is not None else None
        outcome = "hit" if key is not None and cache.holds(key) else "miss"
    found, _ = await to_thread.run_sync(partial(_search, idx, scope, text, opts, ex)) if idx.search_may_wait \
        else _search(idx, scope, text, opts, ex)
    ex.traces[-1].cache = outcome
    return found


def _answered(indexes: Indexes, asker: Asker, query: str, searched: tuple[str, ...],
              hits: Sequence[tuple[str, Hit]], failed: bool = False) -> None:
    """Publish what `asker`'s question got: (index, hit) pairs best first."""
    indexes.answered(SearchAnswered(asker, query, searched, tuple(
        Served(index, h.doc_id, h.title, h.path, h.relevance, h.score, h.revision, h.chunk)
        for index, h in hits), failed))


def _key(scope: EffectiveScope, generation: int, text: str, opts: Options, incarnation: int) -> AnswerKey:
    return AnswerKey(scope.index, generation, text, opts.limit, scope.filter, where_key(opts.where),
                     opts.summary_chars, opts.content_chars, opts.one_per_document, opts.floor, incarnation,
                     opts.dials)


def search_now(idx: ServedIndex, scope: EffectiveScope, query: str, limit: int, *, summary_chars: int,
               content_chars: int, one_per_document: bool = True, floor: float = 0.0,
               with_generation: bool = False, where: MetaFilter | None = None,
               dials: Dials = NO_DIALS) -> Searched:
    """`search` on an opened index, in the calling thread (it may block: see `search`), never
    from the answer cache. For measurements (bench/offload.py); a wing awaits `search`."""
    return _search(idx, scope, normalize_query(query), Options(
        limit, dials.summary_chars or summary_chars, content_chars, one_per_document, floor, with_generation,
        where, dials))[0]


def _search(idx: ServedIndex, scope: EffectiveScope, query: str, opts: Options,
            explain: Explain | None = None) -> tuple[Searched, int | None]:
    """(the search's answer, the generation it may be cached under or None: `KnowledgeIndex.answer`);
    with `explain`, its trace appended there (gateway.core.explain.trace). A hit the reranker
    scored passes the route's rerank threshold when it sets one (the index judged the floor
    before the reranker then), any other its floor; neighbours are read for the kept hits."""
    limit, floor, dials, where = opts.limit, opts.floor, opts.dials, opts.where
    with _index_calls(scope):
        started = time.perf_counter()
        hits, reusable = idx.answer(query, limit, filter=scope.filter, one_per_document=opts.one_per_document,
                                    summary_chars=opts.summary_chars, content_chars=opts.content_chars,
                                    where=where, floor=floor, dials=dials)
        took = (time.perf_counter() - started) * 1000.0
        gen = (reusable if reusable is not None else _generation(idx)) if opts.with_generation else None
    checked = time.perf_counter()
    judged = (h if h.scores.rerank is None else replace(h, relevance=relevance.of(h.scores, h.relevance))
              for h in hits)
    clean = _as_stored if idx.clean_at_ingest else clean_hit  # an index cleaned at ingest serves as stored
    threshold = dials.rerank_threshold
    kept = [h for h in judged if (h.relevance >= floor if threshold is None or h.scores.rerank is None
                                  else h.scores.rerank >= threshold)
            and allows(scope, h.path, h.dataset, True, names=(h.doc_id,))]
    if dials.neighbours:
        with _index_calls(scope):
            kept = idx.with_neighbours(kept, dials.neighbours, opts.content_chars)
    kept = [clean(h) for h in kept]
    if explain is not None:
        with _index_calls(scope):
            explain.traces.append(trace(idx, scope, query, limit, floor=floor, where=where, found=hits, dials=dials,
                                        kept=kept, took_ms=took, check_ms=(time.perf_counter() - checked) * 1000.0,
                                        generation=reusable if reusable is not None else idx.generation))
    return Searched(kept, took, gen), reusable


def _as_stored(hit: Hit) -> Hit:
    return hit


def _generation(idx: ServedIndex) -> int:
    """The reader's label; IndexStats' (meta.json read again) only when the label is unknown."""
    label = idx.generation
    return label if label is not None else idx.stats().generation


async def search_many(indexes: Indexes, targets: Sequence[Target[K]], query: str, limit: int, *,
                      summary_chars: int, content_chars: int, asker: Asker | None = None) -> Merged[K]:
    """`search` in every target (one after the other, each with its own floor), merged: highest
    relevance first (ties keep the targets' order), one hit per (index, document), at most
    `limit`. A target whose index fails is listed in `failed` instead of raising. A coroutine, like
    `search`. With `asker`, the merged answer is published as one `SearchAnswered` (not one per target)."""
    found: list[tuple[K, str, Hit]] = []
    failed: list[K] = []
    for t in targets:
        try:
            got = await search(indexes, t.scope, query, limit, summary_chars=summary_chars,
                               content_chars=content_chars, floor=t.floor, dials=t.dials)
        except DependencyUnavailable:
            failed.append(t.key)
            continue
        found += [(t.key, t.scope.index, h) for h in got.hits]
    seen: set[tuple[str, str]] = set()
    out: list[tuple[K, Hit]] = []
    ex = EXPLAIN.get()
    for key, index, h in sorted(found, key=lambda f: -f[2].relevance):
        if (index, h.doc_id) not in seen:
            seen.add((index, h.doc_id))
            out.append((key, h))
        elif ex is not None:
            ex.merged.append((key, Dropped(h, "merged")))
    if ex is not None:
        ex.merged += [(key, Dropped(h, "limit")) for key, h in out[limit:]]
    merged = Merged(out[:limit], failed)
    if asker is not None and ex is None:  # a try is no caller's question
        by_key = {t.key: t.scope.index for t in targets}
        _answered(indexes, asker, query, tuple(dict.fromkeys(t.scope.index for t in targets)),
                  [(by_key[k], h) for k, h in merged.hits], bool(failed))
    return merged


def generation(indexes: Indexes, scope: EffectiveScope) -> int:
    """The commit opstamp of the scope's index (what a scope revision covers): the label of its
    reader (`KnowledgeIndex.generation`), an attribute read. Raises DependencyUnavailable."""
    ex = EXPLAIN.get()
    idx = indexes.index(scope.index if ex is None else ex.index_for(scope.index))
    with _index_calls(scope):
        return _generation(idx)


def read(indexes: Indexes, scope: EffectiveScope, doc_id: str) -> tuple[StoredDocument | None, int]:
    """(the document `doc_id` as stored, hidden or not, or None when absent; the index
    generation), for a caller that must tell "gone" from "hidden" from "moved out of scope"
    (a read by reference checks `qa_visible` and `allows` itself). Raises DependencyUnavailable."""
    idx = indexes.index(scope.index)
    with _index_calls(scope):
        generation = _generation(idx)  # read first: the document is of this commit or a newer one
        doc = idx.get_document(doc_id, include_hidden=True)
        return (None if doc is None else clean_stored(doc)), generation


def find(indexes: Indexes, scope: EffectiveScope, *, path: str | None = None,
         doc_id: str | None = None) -> StoredDocument | None:
    """The visible document inside `scope` at `path` (exact) or with id `doc_id`, or None when
    there is none, it is hidden or it lies outside the scope — by its path or by its id
(`scope.allows`) — (no existence oracle). Give
    exactly one of path and doc_id. Raises DependencyUnavailable."""
    idx = indexes.index(scope.index)
    with _index_calls(scope):
        key = idx.doc_id_at(path, scope.filter.datasets) if path is not None else doc_id
        doc = idx.get_document(key) if key is not None else None
    if doc is None or not allows(scope, doc.path, doc.dataset, doc.qa_visible, names=(doc.doc_id,)):
        return None
    return clean_stored(doc)
