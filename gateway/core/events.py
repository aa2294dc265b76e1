"""What happened, told to whoever listens: the one seam between request paths and observers.

Rationale: docs/design-notes.md, "gateway/core/events.py".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger("kbgate.events")

E = TypeVar("E")


@dataclass(slots=True)
class Delivery:
    """What happened to one Volcengine callback, for logs, metrics and the deliveries record.

    Never holds a secret; `query` is kept only for debug logs and the opt-in admin view.
    received_at: unix seconds (the app clock). outcome: 'ok' or a reason of
    gateway.core.errors.RET_TABLE. latency_ms: milliseconds from first byte handled to
    response built; search_ms: of the index search alone (None when none ran).
    signature: 'verified' | 'unsigned' | 'failed' | 'unchecked'.
    keys_tried: ids of the live keys the signature was checked against (never values).
    """

    request_id: str
    tenant: str
    received_at: float
    outcome: str = "ok"
    ret: int = 0
    status: int = 200
    key_id: str | None = None
    signature: str = "unchecked"
    signature_reason: str | None = None
    keys_tried: tuple[str, ...] = ()
    skew_seconds: float | None = None
    first_level_id: str | None = None
    second_level_id: str | None = None
    query: str | None = None
    results: int = 0
    latency_ms: float = 0.0
    search_ms: float | None = None
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HybridSearched:
    """One search of an index configured hybrid, for metrics: index name, and its outcome:
    'hybrid' (the vectors were used) or why it was answered lexically ('stale', 'reloading',
    'timeout', 'breaker_open', 'error'; indexes.dense.hybrid.OUTCOMES). Published from the
    thread the search ran in."""

    index: str
    outcome: str


@dataclass(frozen=True, slots=True)
class Reranked:
    """One call of an index's rerank stage, for metrics: index name, outcome ('reranked', or why
    the order before was kept: 'timeout', 'breaker_open', 'error'; indexes.rerank.OUTCOMES), and
    the milliseconds the stage took. Published from the thread the search ran in."""

    index: str
    outcome: str
    duration_ms: float


@dataclass(frozen=True, slots=True)
class AnswerLooked:
    """One lookup in the answer cache (gateway.core.answers), for metrics: index name, and
    'hit' (answered from memory) or 'miss' (searched). Published only while the cache is on
    (search.answer_cache_entries > 0), from the thread the lookup ran in."""

    index: str
    outcome: str


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks a search, as the wing tells `gateway.core.retrieve.search`: for the observers of
    `SearchAnswered` (gap and hit statistics), never for any decision of the search.

    wing: 'volcengine' | 'dify' | 'mcp' | 'agent' (tool API) | 'knowledge' (knowledge protocol).
    caller: the configured tenant name or agent client id (never a key or token).
    routes: ids of the configured routes searched: an agent route's name, or
        '{tenant}/{FirstLevelId}/{SecondLevelId}' for a Volcengine route.
    tool: what the caller called ('callback', 'retrieval', 'search', 'ask', ...).
    probe: an operator's try (/admin/try), not a caller: observers that count callers skip it.
    """

    wing: str
    caller: str
    routes: tuple[str, ...]
    tool: str = "search"
    probe: bool = False


@dataclass(frozen=True, slots=True)
class Served:
    """One hit handed back to a caller, as observers see it: index, document id, title, path,
    relevance (0..1, `indexes.types.Hit.relevance`), BM25/fused score (`Hit.score`), revision,
    chunk (the matched chunk's number, `Hit.chunk`; -1 unknown)."""

    index: str
    doc_id: str
    title: str
    path: str
    relevance: float
    score: float
    revision: str = ""
    chunk: int = -1


@dataclass(frozen=True, slots=True)
class SearchAnswered:
    """One question of a caller answered by the scoped retrieval, published once per question
    (a search over several routes is one event), from the task or thread the search ran in.

    asker: `Asker`. query: the raw question text: observers keep it only where an operator
    opted in (admin.show_queries), never in logs or metrics. hits: what the caller got, best
    first (after scope, min_score and one-per-document). indexes: the indexes searched.
    failed: the search of at least one route failed (its index unavailable).
    """

    asker: Asker
    query: str
    indexes: tuple[str, ...]
    hits: tuple[Served, ...]
    failed: bool = False


class Events:
    """Synchronous fan-out by event type: `subscribe(Delivery, fn)`, then `publish(delivery)`."""

    def __init__(self) -> None:
        self._observers: dict[type, list[Callable[[Any], None]]] = {}

    def subscribe(self, kind: type[E], observer: Callable[[E], None]) -> None:
        """Call `observer(event)` for every published event of exactly type `kind`, in
        subscription order."""
        self._observers.setdefault(kind, []).append(observer)

    def publish(self, event: object) -> None:
        """Hand `event` to each observer of its type. Never raises: a failing observer is logged."""
        for observer in self._observers.get(type(event), ()):
            try:
                observer(event)
            except Exception:  # fail open: observers keep records, the answer already left
                log.warning("event observer failed", extra={"event": type(event).__name__,
                                                            "observer": getattr(observer, "__qualname__", "?")},
                            exc_info=True)
