"""The answer cache of scoped search: a question asked again inside the same scope of the same
index commit is answered from memory (repeat-heavy traffic, `make bench`'s Zipf mix).

Rationale: docs/design-notes.md, "gateway/core/answers.py".
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cachetools import LRUCache

from indexes.types import NO_DIALS, Dials, Hit, MetaFilter, MetaValue, SearchFilter

__all__ = ["AnswerCache", "AnswerKey", "answer_bytes", "normalize_query", "where_key"]

_HIT_OVERHEAD = 200
"""Bytes of one Hit beyond its strings (the slotted object, its int/float fields, the tuple slot)."""

Observe = Callable[[str, str], None]
"""observe(index name, 'hit' | 'miss'): told of every lookup, in the searching thread; it must
not block and must not raise (`Events.publish` does neither)."""

TypedValue = tuple[str, object]


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """What one answer depends on (module doc). query: `normalize_query`'s text; where:
    `where_key`'s canonical form; the rest as `gateway.core.retrieve.search` takes them
    (limit in hits, chars in characters, floor: the relevance floor, 0..1; dials: the route's
    retrieval dials, `indexes.types.Dials`); incarnation:
    `KnowledgeIndex.incarnation` read before the search."""

    index: str
    generation: int
    query: str
    limit: int
    filter: SearchFilter
    where: tuple[str, tuple[tuple[str, str, TypedValue], ...]] | None
    summary_chars: int
    content_chars: int
    one_per_document: bool
    floor: float
    incarnation: int = 0
    dials: Dials = NO_DIALS


def normalize_query(query: str) -> str:
    """`query` stripped, each run of whitespace made one space. Case, width and script are
    kept: the index analyzer folds them (`indexes.analysis.normalize`), but a hybrid index
    embeds the raw text. The analyzer splits on whitespace whatever its kind and length, and
    the search itself runs on this text (`retrieve.search`), so a key and its answer agree."""
    return " ".join(query.split())


def _typed(value: MetaValue | None) -> TypedValue:
    """A value with its type: 1, 1.0 and True compare equal in Python but may filter
    differently (`indexes.metadata`), so they must not share a key."""
    if isinstance(value, tuple):
        return ("tuple", tuple(_typed(v) for v in value))
    return (type(value).__name__, value)


def where_key(where: MetaFilter | None) -> tuple[str, tuple[tuple[str, str, TypedValue], ...]] | None:
    """A hashable canonical form of metadata conditions (None: none): logic, then (name,
    operator, typed value) of each condition in the order given."""
    if where is None:
        return None
    return where.logic, tuple((c.name, c.operator, _typed(c.value)) for c in where.conditions)


def answer_bytes(hits: Sequence[Hit]) -> int:
    """Estimated bytes an answer holds in memory: CPython's size of each hit's strings (1, 2
    or 4 bytes a character plus the object header), metadata items included, plus a fixed
    `_HIT_OVERHEAD` per hit. Shared strings are counted again: an estimate from above."""
    total = 0
    for h in hits:
        total += _HIT_OVERHEAD + sum(sys.getsizeof(s) for s in (
            h.id, h.doc_id, h.title, h.summary, h.content, h.url or "", h.path, h.dataset, h.revision))
        total += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in h.metadata)
    return total


class AnswerCache:
    """At most `entries` answers (entries ≥ 1) holding at most `max_bytes` (`answer_bytes`;
    None: no byte bound), least recently used evicted first; thread-safe. An answer larger
    than `max_bytes` by itself is not stored.

    observe: told of each lookup's outcome (`Observe`), e.g. to count it in /metrics."""

    def __init__(self, entries: int, observe: Observe | None = None, *, max_bytes: int | None = None) -> None:
        if entries < 1:
            raise ValueError("an answer cache holds at least one entry")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("an answer cache's byte bound is at least one byte")
        self.entries = entries
        self.max_bytes = max_bytes
        self._lru: LRUCache[AnswerKey, tuple[Hit, ...]] = (
            LRUCache(maxsize=entries) if max_bytes is None else LRUCache(maxsize=max_bytes, getsizeof=answer_bytes))
        self._lock = threading.Lock()
        self._observe = observe

    def get(self, key: AnswerKey) -> list[Hit] | None:
        """A new list of the hits stored under `key`, or None (a miss)."""
        with self._lock:
            hits = self._lru.get(key)
        if self._observe is not None:
            self._observe(key.index, "miss" if hits is None else "hit")
        return None if hits is None else list(hits)

    def holds(self, key: AnswerKey) -> bool:
        """True when an answer is stored under `key`; neither counted (`observe`) nor moved in
        the LRU order: what an admin's try asks (gateway.core.explain)."""
        with self._lock:
            return key in self._lru

    def put(self, key: AnswerKey, hits: Sequence[Hit]) -> None:
        """Store `hits` (copied into a tuple) under `key`, evicting the least recently used."""
        answer = tuple(hits)
        with self._lock:
            try:
                self._lru[key] = answer
            except ValueError:  # larger than the whole byte budget: not kept
                return
            while len(self._lru) > self.entries:  # the count bound, beside the byte bound
                self._lru.popitem()

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._lru.clear()

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def bytes(self) -> int:
        """Estimated bytes held (`answer_bytes` of every entry)."""
        with self._lock:
            if self.max_bytes is not None:  # cachetools keeps the sum of getsizeof
                return int(self._lru.currsize)
            return sum(answer_bytes(v) for v in self._lru.values())
