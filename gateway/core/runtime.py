"""What one worker holds while serving: config, clock, replay store, indexes, events.

Rationale: docs/design-notes.md, "gateway/core/runtime.py".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.core.answers import AnswerCache
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import AnswerLooked, Events, HybridSearched, Reranked, SearchAnswered
from gateway.core.replay import make_store
from gateway.core.types import Clock, NonceStore
from indexes import segmenter
from indexes.dense import HybridStore
from indexes.errors import IndexStoreError, IndexUnavailableError
from indexes.store import IndexStore
from indexes.types import IndexStats, SearchBounds, ServedIndex

log = logging.getLogger("kbgate.runtime")


def _bounds(config: Config) -> SearchBounds:
    """The per-query work bounds `config` sets ([search] max_chunks_per_*)."""
    return SearchBounds(config.search.max_chunks_per_query, config.search.max_chunks_per_document)


class Runtime:
    """config: the current Config. clock: the one clock seam. nonces: the replay store (Redis
    when replay.redis_url is set, else in-process). indexes: the read-only index store under
    indexes.dir (an index configured hybrid opens as indexes.dense.HybridIndex; one configured with
    a rerank stage gets it attached). events: where
    request paths publish what happened. `answers()`: the answer cache of the current config."""

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK, nonces: NonceStore | None = None) -> None:
        self.config = config
        self.clock = clock
        self.nonces: NonceStore = nonces or make_store(
            config.replay.redis_url, config.replay.timeout_seconds, clock
        )
        self.events = Events()
        self.indexes: IndexStore = HybridStore(config.indexes_dir, dense=config.dense, observe=self._hybrid_searched,
                                               rerank=config.rerank, observe_rerank=self._reranked,
                                               bounds=_bounds(config), remote=config.remote)
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._answers: AnswerCache | None = None
        self._answers_config: Config | None = None

    def index(self, name: str) -> ServedIndex:
        """The named index, reloaded if a new commit landed, searching within the current
        config's bounds (search.max_chunks_per_query, search.max_chunks_per_document: a
        config reload applies them). Raises DependencyUnavailable('index_unavailable') when
        it cannot be opened.

        A reload that fails (meta.json damaged or the folder deleted under a running worker)
        keeps the reader opened before: it answers from the files it mapped, one warning line
        per failed change is logged, and /readyz reports the index on disk (gateway/serve/health.py).
        """
        try:
            idx = self.indexes.open(name)
        except (IndexStoreError, OSError, ValueError):
            log.warning("index unavailable", extra={"index": name})
            raise DependencyUnavailable("index_unavailable", f"index {name!r} is not available") from None
        try:
            idx.maybe_reload()  # retried only once meta.json changes again
        except IndexUnavailableError:  # an engine down (Milvus): there is no reader to answer from
            log.warning("index unavailable", extra={"index": name})
            raise DependencyUnavailable("index_unavailable", f"index {name!r} is not available") from None
        except (IndexStoreError, OSError, ValueError) as exc:
            log.warning("index reload failed, answering from the reader opened before",
                        extra={"index": name, "problem": " ".join(str(exc).split())[:300]})
        idx.synonyms = self.config.synonyms.get(name)  # a reload applies an owner's edit at once
        s = self.config.search
        if (idx.bounds.max_chunks_per_query, idx.bounds.max_chunks_per_document) != (
                s.max_chunks_per_query, s.max_chunks_per_document):
            idx.bounds = self.indexes.bounds = _bounds(self.config)
        return idx

    def answers(self) -> AnswerCache | None:
        """The answer cache of the current config (`gateway.core.answers`), or None when
        search.answer_cache_entries is 0. A config reload (a new `config` object) gives a new,
        empty cache of the new size (entries and search.answer_cache_mib): whatever shapes an
        answer (search bounds) may have changed.
        Lookups are counted through `events` (`AnswerLooked`)."""
        config = self.config
        if config is not self._answers_config:
            entries = config.search.answer_cache_entries
            self._answers = AnswerCache(entries, observe=self._answer_looked,
                                        max_bytes=config.search.answer_cache_mib << 20) if entries > 0 else None
            self._answers_config = config
        return self._answers

    def answered(self, event: SearchAnswered) -> None:
        """Publish what a caller's question got (`gateway.core.retrieve`), to the observers of
        `SearchAnswered` (gap and hit statistics). Never raises."""
        self.events.publish(event)

    def _answer_looked(self, index: str, outcome: str) -> None:
        self.events.publish(AnswerLooked(index, outcome))

    def _hybrid_searched(self, index: str, outcome: str) -> None:
        self.events.publish(HybridSearched(index, outcome))

    def _reranked(self, index: str, outcome: str, duration_ms: float) -> None:
        self.events.publish(Reranked(index, outcome, duration_ms))

    def routed_indexes(self) -> list[str]:
        """Names of the indexes a tenant route or an `[agent.routes.*]` entry points to, sorted."""
        return sorted({r.index for t in self.config.tenants.values() for r in t.routes}
                      | {r.index for r in self.config.agent.routes.values()})

    def open_routed(self) -> None:
        """Open every routed hybrid index, so its query model starts loading (a lexical one opens at
        its first question); one that cannot be opened is left to /readyz and its callers' errors.
        Blocking: run it in a thread. The word segmenter loads first, when anything is routed."""
        store = self.indexes
        if self.routed_indexes():
            segmenter.warm()
        for name in self.routed_indexes():
            if not isinstance(store, HybridStore) or store.dense_for(name) is None:
                continue
            try:
                self.index(name)
            except (DependencyUnavailable, OSError, ValueError):
                continue

    def index_stats(self) -> list[tuple[str, IndexStats | None]]:
        """(name, stats or None when it cannot be opened) of every routed index (tenant and
        agent routes), for /metrics."""
        out: list[tuple[str, IndexStats | None]] = []
        for name in self.routed_indexes():
            try:
                out.append((name, self.index(name).stats()))
            except (DependencyUnavailable, OSError, ValueError):
                out.append((name, None))
        return out

    def on_close(self, close: Callable[[], Awaitable[None]]) -> None:
        """Run `await close()` when the worker stops (in reverse order of registration)."""
        self._closers.append(close)

    async def close(self) -> None:
        """Close everything registered, then the opened indexes, then the replay store. A failing
        closer is logged."""
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:  # shutting down: close the rest anyway
                log.warning("close failed", exc_info=True)
        self.indexes.close()  # a hybrid index's encoder threads
        await self.nonces.close()
