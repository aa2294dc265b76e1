"""The rerank stage of one index: a deadline, a circuit breaker, counted outcomes.

Rationale: docs/design-notes.md, "indexes/rerank/stage.py".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from ..dense.query import Breaker
from ..errors import RerankError, RerankUnavailable
from .config import RerankConfig
from .providers import Reranker, make_reranker

__all__ = ["OUTCOMES", "Observe", "RerankStage"]

log = logging.getLogger("kbgate.rerank")
POOL_THREADS = 4

OUTCOMES = ("reranked", "timeout", "breaker_open", "error")
"""What became of one rerank call: `reranked` (the reranker's order was used) or why the order
of the stage before was kept: `timeout` (no answer within timeout_ms), `breaker_open`,
`error` (the reranker failed or answered something unusable)."""

Observe = Callable[[str, str, float], None]
"""observe(index name, outcome, milliseconds the stage took): told of every rerank call
(outcome in OUTCOMES), in the searching thread; it must not block. An observer that raises is
logged and ignored."""


class RerankStage:
    """The rerank stage of index `index` (see module doc). Thread-safe.

    config: its settings. reranker: the provider (`make_reranker(config)` when None).
    clock: monotonic seconds. observe: told of each call's outcome (`Observe`).
    counters: this process's calls by outcome ('reranked', 'fallback:timeout', ...).
    """

    def __init__(self, index: str, config: RerankConfig, reranker: Reranker | None = None, *,
                 clock: Callable[[], float] = time.monotonic, observe: Observe | None = None) -> None:
        self.index = index
        self.config = config
        self.reranker = reranker if reranker is not None else make_reranker(config)
        self.deadline = config.timeout_ms / 1000.0
        self.breaker = Breaker(config.breaker_failures, config.breaker_reset_seconds, clock, what="rerank")
        self._clock = clock
        self._observe = observe
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {}
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="kbgate-rerank")

    def _count(self, outcome: str, started: float) -> None:
        key = outcome if outcome == "reranked" else f"fallback:{outcome}"
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + 1
        if self._observe is not None:
            try:
                self._observe(self.index, outcome, (self._clock() - started) * 1000.0)
            except Exception:  # an observer never fails a search
                log.warning("rerank outcome observer failed", exc_info=True)

    def _call(self, query: str, documents: Sequence[str], started: float) -> list[float]:
        """Runs in the pool. The breaker hears of every call once, here: an error, or an answer
        later than the deadline (the search went on without it), is a failure."""
        t0 = self._clock()
        try:
            if t0 - started >= self.deadline:  # queued behind slow calls: nobody waits any more
                raise RerankUnavailable(self.reranker.name, "timeout", "queued past the deadline")
            scores = self.reranker.scores(query, documents, self.deadline - (t0 - started))
        except BaseException:  # a provider bug must not escape into a search either
            self.breaker.failure()
            raise
        if self._clock() - started > self.deadline:
            self.breaker.failure()
        else:
            self.breaker.success()
        return scores

    def scores(self, query: str, documents: Sequence[str]) -> list[float] | None:
        """The reranker's relevance of each document (in order, 0..1), or None: keep the order
        of the stage before (deadline missed, breaker open, reranker failed; counted). An empty
        `documents` is [] without a call. Never raises; waits at most timeout_ms."""
        if not documents:
            return []
        started = self._clock()
        if not self.breaker.allow():
            self._count("breaker_open", started)
            return None
        future = self._pool.submit(self._call, query, list(documents), started)
        try:
            scores = future.result(timeout=max(started + self.deadline - self._clock(), 0.0))
        except FutureTimeout:
            self._count("timeout", started)
            return None
        except RerankError as exc:  # the client's own timeout may fire a hair before ours
            if exc.reason != "timeout":
                log.warning("rerank failed", extra={"index": self.index, "provider": exc.provider,
                                                    "reason": exc.reason})
            self._count("timeout" if exc.reason == "timeout" else "error", started)
            return None
        except Exception as exc:  # noqa: BLE001 - logged; the search keeps the order before
            log.warning("rerank failed", extra={"index": self.index, "error": type(exc).__name__})
            self._count("error", started)
            return None
        self._count("reranked", started)
        return scores

    def close(self) -> None:
        """Stop the pool's threads and the provider's connections."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.reranker.close()
