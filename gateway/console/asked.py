"""Questions per day, per route and outcome, for the overview's chart (no question text, ever).

Rationale: docs/design-notes.md, "gateway/console/asked.py".
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from redis.exceptions import RedisError

from gateway.console.gaps.flushing import FlushLoop
from gateway.console.gaps.record import classify, route_label
from gateway.console.gaps.store import DAY, day_of, days_back
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import SearchAnswered
from gateway.core.redis_clients import async_client

log = logging.getLogger("kbgate.asked")

OUTCOMES = ("answered", "no_answer", "low_score")
MAX_PENDING = 100_000
Counts = dict[str, Counter[tuple[str, str]]]  # day → (route label, outcome) → questions


class AskedStore(Protocol):
    shared: bool

    async def add(self, counts: Counts, keep_days: int) -> None: ...

    async def read(self, days: list[str]) -> Counts: ...

    async def close(self) -> None: ...


class MemoryAskedStore:
    """This process's counts only."""

    shared = False

    def __init__(self) -> None:
        self._days: Counts = {}

    async def add(self, counts: Counts, keep_days: int) -> None:
        for day, c in counts.items():
            self._days.setdefault(day, Counter()).update(c)
        for day in sorted(self._days)[:-keep_days - 1]:
            del self._days[day]

    async def read(self, days: list[str]) -> Counts:
        return {d: Counter(self._days.get(d, Counter())) for d in days}

    async def close(self) -> None:
        return None


class RedisAskedStore:
    """The counts in Redis (module doc for the keys). timeout: seconds per round trip."""

    shared = True

    def __init__(self, url: str, prefix: str, timeout: float = 1.0) -> None:
        self.p = prefix
        self._timeout = timeout
        self.client = async_client(url, timeout)

    async def add(self, counts: Counts, keep_days: int) -> None:
        async with asyncio.timeout(self._timeout * 3):
            pipe = self.client.pipeline(transaction=False)
            for day, c in counts.items():
                key = f"{self.p}:asked:{day}"
                for (route, outcome), n in c.items():
                    pipe.hincrby(key, f"{route}|{outcome}", n)
                pipe.expire(key, (keep_days + 1) * DAY)
            await pipe.execute()

    async def read(self, days: list[str]) -> Counts:
        try:
            async with asyncio.timeout(self._timeout * 3):
                pipe = self.client.pipeline(transaction=False)
                for d in days:
                    pipe.hgetall(f"{self.p}:asked:{d}")
                rows = await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the question counts are unavailable") from None
        out: Counts = {}
        for d, row in zip(days, rows, strict=True):
            c: Counter[tuple[str, str]] = Counter()
            for field, n in row.items():
                name = field.decode() if isinstance(field, bytes) else str(field)
                route, _, outcome = name.rpartition("|")
                c[(route, outcome)] += int(n)
            out[d] = c
        return out

    async def close(self) -> None:
        await self.client.aclose()


class QuestionCounts(FlushLoop[tuple[str, str, str]]):
    """The observer and its store. config: () -> the current Config; now: the clock (unix s)."""

    def __init__(self, config: Callable[[], Config], now: Callable[[], float], store: AskedStore) -> None:
        super().__init__(config, now, log, MAX_PENDING)  # queued: (day, route label, outcome)
        self.store = store

    def observe(self, e: SearchAnswered) -> None:
        """Count one caller's question (skips an admin's try and a failed search with no hit)."""
        if e.asker.probe or (e.failed and not e.hits):
            return
        outcome = classify(e, self._config().gaps.threshold_of(e.asker.routes))
        self._queue((day_of(self._now()), route_label(e), outcome))

    async def flush(self) -> None:
        """Write what is queued (one batch). Never raises."""
        if not self._pending:
            return
        counts: Counts = {}
        for day, route, outcome in self._take():
            counts.setdefault(day, Counter())[(route, outcome)] += 1
        try:
            await self.store.add(counts, self._config().gaps.keep_days)
        except (RedisError, OSError, TimeoutError) as exc:
            self._warn(f"question counts: write failed ({type(exc).__name__}), a batch dropped")

    async def per_day(self) -> tuple[list[str], Counts]:
        """(the days of the retention window, oldest first; their counts). Flushes first, so a
        question answered before the call is counted. Raises DependencyUnavailable."""
        await self.flush()
        days = sorted(days_back(self._now(), self._config().gaps.keep_days))
        return days, await self.store.read(days)

    async def close(self) -> None:
        await self.flush()
        await self.store.close()


def make_counts(config: Callable[[], Config], now: Callable[[], float]) -> QuestionCounts:
    """Over Redis when replay.redis_url is set, else this process's memory."""
    cfg = config()
    store: AskedStore = (RedisAskedStore(cfg.replay.redis_url, cfg.replay.key_prefix, cfg.replay.timeout_seconds)
                         if cfg.replay.redis_url else MemoryAskedStore())
    return QuestionCounts(config, now, store)
