"""Where gap questions and hit counts are kept: Redis (shared by every worker and replica) when
replay.redis_url is set, else this process's memory. Both bounded; written only by the
recorder's background flush (gateway.console.gaps.record), never on a request.

Rationale: docs/design-notes.md, "gateway/console/gaps/store.py".
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from typing import Any, Protocol

import orjson
from redis.exceptions import RedisError

from gateway.console.gaps.groups import Question
from gateway.core.config import GapsConfig
from gateway.core.errors import DependencyUnavailable
from gateway.core.redis_clients import async_client

DAY = 86400
Served = dict[tuple[str, ...], Counter[str]]  # (index, day) or (index, day, TOP) → document id → times
TOP = "top"  # the third part of a Served key: counts of the top answer (rank 1) only
CHUNK = "chunk"  # the third part of a Served key: counts by '{doc_id}#{chunk}'
Example = tuple[str, float, str]  # (question key, unix s, text)


class GapStore(Protocol):
    """shared: True when every worker and replica sees the same record (Redis)."""

    shared: bool

    async def key(self) -> bytes: ...

    async def apply(self, questions: list[Question], examples: list[Example], served: Served,
                    cfg: GapsConfig, now: float, protected: frozenset[str] = frozenset()) -> None:
        """Add one batch; protected: question keys evicted for max_questions only last."""

    async def questions(self, cfg: GapsConfig, now: float, *, with_examples: bool) -> list[Question]: ...

    async def served(self, index: str, days: list[str], *, top: bool = False, kind: str = "") -> Counter[str]: ...

    async def close(self) -> None: ...


def day_of(ts: float) -> str:
    """'YYYY-MM-DD' (UTC) of unix seconds `ts`."""
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def days_back(now: float, n: int) -> list[str]:
    """The last `n` UTC days up to and including today's, newest first."""
    return [day_of(now - i * DAY) for i in range(n)]


def _add(into: Question, d: Question) -> None:
    into.count += d.count
    into.no_answer += d.no_answer
    into.low_score += d.low_score
    into.first = min(into.first, d.first) if into.first else d.first
    into.last = max(into.last, d.last)
    into.days.update(d.days)
    into.callers.update(d.callers)
    into.routes.update(d.routes)
    into.terms = d.terms or into.terms
    into.best = d.best or into.best
    into.near = d.near or into.near


class MemoryGapStore:
    """This process's record: same bounds as Redis (max_questions, keep_days, examples)."""

    shared = False

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._q: dict[str, Question] = {}
        self._x: dict[str, list[tuple[float, str]]] = {}
        self._served: Served = {}

    async def key(self) -> bytes:
        return self._key

    async def apply(self, questions: list[Question], examples: list[Example], served: Served,
                    cfg: GapsConfig, now: float, protected: frozenset[str] = frozenset()) -> None:
        for d in questions:
            _add(self._q.setdefault(d.key, Question(d.key)), d)
        text_horizon = now - cfg.text_seconds
        for key, ts, text in examples:
            self._x[key] = [(ts, text), *self._x.get(key, [])][:cfg.max_examples]
        self._drop_texts(text_horizon)
        for k, counts in served.items():
            self._served.setdefault(k, Counter()).update(counts)
        horizon = now - cfg.keep_days * DAY
        kept = sorted((q for q in self._q.values() if q.last >= horizon), key=lambda q: (q.key in protected, q.last),
                      reverse=True)[:cfg.max_questions]
        self._q = {q.key: q for q in kept}
        self._x = {k: v for k, v in self._x.items() if k in self._q}
        live = set(days_back(now, cfg.keep_days))
        self._served = {k: v for k, v in self._served.items() if k[1] in live}

    def _drop_texts(self, horizon: float) -> None:
        """Drop every kept text older than `horizon` (unix s), and lists left empty."""
        self._x = {k: texts for k, v in self._x.items() if (texts := [(t, q) for t, q in v if t >= horizon])}

    async def questions(self, cfg: GapsConfig, now: float, *, with_examples: bool) -> list[Question]:
        out = []
        if with_examples:
            self._drop_texts(now - cfg.text_seconds)
        for q in self._q.values():
            copy = Question(q.key, q.terms, q.count, q.no_answer, q.low_score, q.first, q.last, Counter(q.days),
                            Counter(q.callers), Counter(q.routes), list(q.best), near=list(q.near))
            if with_examples:
                copy.examples = [t for ts, t in self._x.get(q.key, []) if ts >= now - cfg.text_seconds]
            out.append(copy)
        return out

    async def served(self, index: str, days: list[str], *, top: bool = False, kind: str = "") -> Counter[str]:
        total: Counter[str] = Counter()
        kind = TOP if top else kind
        for day in days:
            total.update(self._served.get((index, day, kind) if kind else (index, day), Counter()))
        return total

    async def close(self) -> None:
        return None


class RedisGapStore:
    """The record in Redis (module doc for the keys). url: a Redis URL; prefix: key prefix;
    timeout: seconds per round trip. Reads raise DependencyUnavailable('replay_store_unavailable');
    writes raise RedisError / OSError / TimeoutError (the recorder fails open)."""

    shared = True

    def __init__(self, url: str, prefix: str, timeout: float = 1.0) -> None:
        self.p = prefix
        self._timeout = timeout
        self.client = async_client(url, timeout)

    async def key(self) -> bytes:
        async with asyncio.timeout(self._timeout):
            await self.client.set(f"{self.p}:gaps:key", secrets.token_hex(32), nx=True)
            got = await self.client.get(f"{self.p}:gaps:key")
        if got is None:
            raise RedisError("gaps key vanished")
        return got if isinstance(got, bytes) else str(got).encode()

    async def apply(self, questions: list[Question], examples: list[Example], served: Served,
                    cfg: GapsConfig, now: float, protected: frozenset[str] = frozenset()) -> None:
        keep = cfg.keep_days * DAY
        zset = f"{self.p}:gaps:q"
        async with asyncio.timeout(self._timeout * 3):
            pipe = self.client.pipeline(transaction=False)
            for d in questions:
                h = f"{self.p}:gaps:q:{d.key}"
                pipe.hincrby(h, "n", d.count)
                pipe.hincrby(h, "no", d.no_answer)
                pipe.hincrby(h, "low", d.low_score)
                pipe.hsetnx(h, "first", d.first)
                pipe.hset(h, "last", d.last)
                pipe.hset(h, "terms", orjson.dumps(d.terms))
                if d.best:
                    pipe.hset(h, "best", orjson.dumps(d.best))
                if d.near:
                    pipe.hset(h, "near", orjson.dumps(d.near))
                for prefix, counts in (("d:", d.days), ("c:", d.callers), ("r:", d.routes)):
                    for name, n in counts.items():
                        pipe.hincrby(h, prefix + name, n)
                pipe.expire(h, keep)
                pipe.zadd(zset, {d.key: d.last})
            for n, (key, ts, text) in enumerate(examples):  # n: a batch's own order breaks a tie in time
                x = f"{self.p}:gaps:t:{key}"
                pipe.zadd(x, {orjson.dumps({"t": ts, "q": text, "n": n}): ts + n * 1e-6})
                pipe.zremrangebyscore(x, "-inf", f"({now - cfg.text_seconds}")
                pipe.zremrangebyrank(x, 0, -(cfg.max_examples + 1))
                pipe.expire(x, cfg.text_seconds)
            for (index, day, *kind), counts in served.items():
                s = f"{self.p}:{kind[0] if kind else 'served'}:{index}:{day}"
                for doc, n in counts.items():
                    pipe.zincrby(s, n, doc)
                pipe.expire(s, keep + DAY)
            pipe.zremrangebyscore(zset, "-inf", now - keep)
            pipe.zcard(zset)
            *_, size = await pipe.execute()
            if size > cfg.max_questions:  # the least recently seen go first, filed or marked ones last
                excess = size - cfg.max_questions
                oldest = await self.client.zrange(zset, 0, excess + len(protected) - 1)
                names = [n.decode() if isinstance(n, bytes) else str(n) for n in oldest]
                names = ([n for n in names if n not in protected] + [n for n in names if n in protected])[:excess]
                if names:
                    await self.client.zrem(zset, *names)
                    await self.client.delete(*[f"{self.p}:gaps:{k}:{n}" for n in names for k in ("q", "t", "x")])

    async def questions(self, cfg: GapsConfig, now: float, *, with_examples: bool) -> list[Question]:
        try:
            async with asyncio.timeout(self._timeout * 3):
                raw = await self.client.zrevrange(f"{self.p}:gaps:q", 0, cfg.max_questions - 1)
                names = [n.decode() if isinstance(n, bytes) else n for n in raw]
                pipe = self.client.pipeline(transaction=False)
                horizon = now - cfg.text_seconds
                for n in names:
                    pipe.hgetall(f"{self.p}:gaps:q:{n}")
                    if with_examples:  # expired text is dropped here, not only hidden
                        pipe.zremrangebyscore(f"{self.p}:gaps:t:{n}", "-inf", f"({horizon}")
                        pipe.zrevrange(f"{self.p}:gaps:t:{n}", 0, cfg.max_examples - 1)
                got = await pipe.execute() if names else []
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the gaps record is unavailable") from None
        step = 3 if with_examples else 1
        out = []
        for i, name in enumerate(names):
            assert isinstance(name, str)
            h = {(k.decode() if isinstance(k, bytes) else k): v for k, v in got[i * step].items()}
            if not h:
                continue
            q = _question(name, h)
            if with_examples:
                for item in got[i * step + 2]:
                    rec = orjson.loads(item)
                    if isinstance(rec, dict) and rec.get("t", 0) >= horizon and isinstance(rec.get("q"), str):
                        q.examples.append(rec["q"])
            out.append(q)
        return out

    async def served(self, index: str, days: list[str], *, top: bool = False, kind: str = "") -> Counter[str]:
        """document id → times served (any rank; top: as the top answer only; kind CHUNK:
        '{doc_id}#{n}' → times that chunk was the hit) over `days`."""
        kind = TOP if top else kind or "served"
        try:
            async with asyncio.timeout(self._timeout * 3):
                pipe = self.client.pipeline(transaction=False)
                for day in days:
                    pipe.zrange(f"{self.p}:{kind}:{index}:{day}", 0, -1, withscores=True)
                got = await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the hit statistics are unavailable") from None
        total: Counter[str] = Counter()
        for rows in got:
            for doc, n in rows:
                total[doc.decode() if isinstance(doc, bytes) else doc] += int(n)
        return total

    async def close(self) -> None:
        await self.client.aclose()


def _question(name: str, h: dict[str, Any]) -> Question:
    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    q = Question(name, tuple(orjson.loads(h.get("terms", b"[]"))), int(h.get("n", 0)), int(h.get("no", 0)),
                 int(h.get("low", 0)), float(h.get("first", 0)), float(h.get("last", 0)))
    q.best = orjson.loads(h["best"]) if "best" in h else []
    q.near = orjson.loads(h["near"]) if "near" in h else []
    for field, v in h.items():
        for prefix, counts in (("d:", q.days), ("c:", q.callers), ("r:", q.routes)):
            if field.startswith(prefix):
                counts[field[len(prefix):]] = int(text(v))
    return q


def make_gap_store(redis_url: str | None, prefix: str, timeout: float) -> GapStore:
    """Redis when replay.redis_url is set, else this process's memory."""
    return RedisGapStore(redis_url, prefix, timeout) if redis_url else MemoryGapStore()
