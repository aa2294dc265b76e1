"""The query embedding of a search: a per-query deadline, a circuit breaker, a small cache.

Rationale: docs/design-notes.md, "indexes/dense/query.py".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..errors import EmbeddingError, EmbeddingUnavailable
from .providers import Embedder

__all__ = ["Breaker", "Pending", "QueryEncoder", "QueryOutcome"]

log = logging.getLogger("kbgate.dense")
QUERY_CACHE_SIZE = 1024
POOL_THREADS = 4
WARM_UP_TEXT = "预热"
WARM_UP_SECONDS = 120.0
"""The longest the warm-up's one embedding may take (a model served over HTTP included)."""

Vector = npt.NDArray[np.float32]


class Breaker:
    """Consecutive-failure circuit breaker. Thread-safe.

    failures: consecutive failures that open it (>= 1). reset_seconds: how long it stays open
    before one trial call. clock: monotonic seconds. what: the guarded dependency, for the log
    line ('embedding'; the rerank stage's is 'rerank').
    """

    def __init__(self, failures: int, reset_seconds: float, clock: Callable[[], float] = time.monotonic,
                 what: str = "embedding") -> None:
        self.failures, self.reset_seconds, self._clock = failures, reset_seconds, clock
        self.what = what
        self._lock = threading.Lock()
        self._count = 0
        self._opened_at: float | None = None
        self._trial = False

    @property
    def state(self) -> str:
        """'closed', 'open' or 'half-open'."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            return "half-open" if self._clock() - self._opened_at >= self.reset_seconds else "open"

    def allow(self) -> bool:
        """May a call be made now? In half-open state only one trial at a time is allowed."""
        with self._lock:
            if self._opened_at is None:
                return True
            if self._clock() - self._opened_at < self.reset_seconds or self._trial:
                return False
            self._trial = True
            return True

    def success(self) -> None:
        with self._lock:
            self._count, self._opened_at, self._trial = 0, None, False

    def failure(self) -> None:
        with self._lock:
            self._count += 1
            self._trial = False
            if self._opened_at is not None or self._count >= self.failures:
                if self._opened_at is None:
                    log.warning(f"{self.what} breaker opened", extra={"failures": self._count})
                self._opened_at = self._clock()


@dataclass(slots=True)
class Pending:
    """A query embedding under way: started (monotonic seconds), future or ready vector, or
    the reason there will be none ('breaker_open')."""

    started: float
    future: Future[Vector] | None = None
    vector: Vector | None = None
    skipped: str | None = None


@dataclass(slots=True)
class QueryOutcome:
    """What became of one query embedding: vector or None, and why none ('timeout',
    'breaker_open', 'error:<reason>', 'stale' (no vectors of this generation))."""

    vector: Vector | None
    reason: str | None = None
    waited_ms: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


class QueryEncoder:
    """Query embeddings with a deadline, a breaker and an LRU of recent queries.

    embedder: the provider. deadline_ms: per query, from `start` to the vector.
    """

    def __init__(self, embedder: Embedder, deadline_ms: int, breaker: Breaker,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.embedder = embedder
        self.deadline = deadline_ms / 1000.0
        self.breaker = breaker
        self._clock = clock
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="kbgate-embed")
        self._warming = False
        self._warmed = threading.Event()
        self.warm_error: str | None = None

    @property
    def warmed(self) -> bool:
        """True once `warm()`'s load and first embedding finished (or when it was never asked)."""
        return not self._warming or self._warmed.is_set()

    def _cached(self, text: str) -> Vector | None:
        with self._cache_lock:
            v = self._cache.get(text)
            if v is not None:
                self._cache.move_to_end(text)
            return v

    def _remember(self, text: str, vector: Vector) -> None:
        with self._cache_lock:
            self._cache[text] = vector
            self._cache.move_to_end(text)
            while len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)

    def _call(self, text: str, started: float) -> Vector:
        """Runs in the pool. The breaker hears of every call once, here: a failure, or an
        answer later than the deadline (the search has moved on without it), counts as a
        failure; only an answer in time counts as a success."""
        t0 = self._clock()
        if t0 - started >= self.deadline:  # queued behind slow calls: nobody waits for it any more
            raise EmbeddingUnavailable(self.embedder.name, "timeout", "queued past the deadline")
        counted = self.warmed  # a cold start's late answers never open the breaker
        try:
            vector = self.embedder.embed_query(text, self.deadline - (t0 - started))
        except BaseException:  # a provider bug must not escape into a search either
            if counted:
                self.breaker.failure()
            raise
        if self._clock() - t0 > self.deadline:
            if counted:
                self.breaker.failure()
        else:
            self.breaker.success()
        self._remember(text, vector)  # a late answer still serves the next identical query
        return vector

    def start(self, text: str) -> Pending:
        """Begin embedding `text`; never blocks (a cached query is ready at once)."""
        now = self._clock()
        cached = self._cached(text)
        if cached is not None:
            return Pending(now, vector=cached)
        if not self.breaker.allow():
            return Pending(now, skipped="breaker_open")
        return Pending(now, future=self._pool.submit(self._call, text, now))

    def wait(self, pending: Pending) -> QueryOutcome:
        """The vector, or None with the reason, within what is left of the deadline."""
        if pending.vector is not None:
            return QueryOutcome(pending.vector)
        if pending.future is None:
            return QueryOutcome(None, pending.skipped or "breaker_open")
        left = pending.started + self.deadline - self._clock()
        t0 = self._clock()
        try:
            vector = pending.future.result(timeout=max(left, 0.0))
        except FutureTimeout:
            return QueryOutcome(None, "timeout", (self._clock() - t0) * 1000)
        except EmbeddingError as exc:  # the provider's own timeout may fire a hair before ours
            reason = "timeout" if exc.reason == "timeout" else f"error:{exc.reason}"
            return QueryOutcome(None, reason, (self._clock() - t0) * 1000)
        except Exception as exc:  # noqa: BLE001 - logged; the search goes on lexically
            log.warning("query embedding failed", extra={"error": type(exc).__name__})
            return QueryOutcome(None, "error:internal", (self._clock() - t0) * 1000)
        return QueryOutcome(vector, None, (self._clock() - t0) * 1000)

    def warm(self) -> None:
        """Load the provider's model and embed WARM_UP_TEXT once on the pool, without blocking
        (module doc): until then `warmed` is False, queries answer lexically when their deadline
        passes, and no failure is counted. A load or embedding that fails ends the warm-up too,
        with `warm_error` set (the reason, no text)."""
        self._warming = True

        def load() -> None:
            try:
                self.embedder.warm()
                self._remember(WARM_UP_TEXT, self.embedder.embed_query(WARM_UP_TEXT, WARM_UP_SECONDS))
            except Exception as exc:  # noqa: BLE001 - the first query will report it
                self.warm_error = exc.reason if isinstance(exc, EmbeddingError) else type(exc).__name__
                log.warning("embedding provider failed to load", extra={"error": self.warm_error})
            finally:
                self._warmed.set()

        self._pool.submit(load)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.embedder.close()
