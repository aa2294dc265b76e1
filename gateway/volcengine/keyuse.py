"""Key usage: when each signing key last verified a callback, and how often.

Rationale: docs/design-notes.md, "gateway/volcengine/keyuse.py".
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from redis.exceptions import RedisError

from gateway.core.background import BOOKKEEPING_LINGER, BackgroundWriter
from gateway.core.redis_clients import async_client, sync_client
from gateway.core.types import SECONDS

log = logging.getLogger("kbgate.keyuse")

KEEP = 90 * 24 * 3600 * SECONDS  # a key unused this long has no record any more
WARN_EVERY = 10 * SECONDS


def keyuse_key(prefix: str, tenant: str, key_id: str) -> str:
    """Redis key of one signing key's usage hash: '{prefix}:keyuse:{tenant}:{key_id}'."""
    return f"{prefix}:keyuse:{tenant}:{key_id}"


def worker_name() -> str:
    """'{hostname}:{pid}': the field suffix naming this worker in a usage hash."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class KeyUse:
    """Usage of one key: count (verified callbacks), last (unix seconds or None),
    workers: {'host:pid': count} of the workers that noted it (Redis only)."""

    count: int = 0
    last: float | None = None
    workers: dict[str, int] = field(default_factory=dict)


class KeyUsage(Protocol):
    """Counts verified signatures per key (memory or Redis; see the module docstring).

    note(tenant, key_id, at): count one at `at` (unix seconds); no I/O, never raises.
    read(tenant, key_ids): {key_id: KeyUse}. flush(): wait until noted uses are readable.
    """

    shared: bool

    def note(self, tenant: str, key_id: str, at: float) -> None: ...

    async def read(self, tenant: str, key_ids: Iterable[str]) -> dict[str, KeyUse]: ...

    async def flush(self, timeout: float = 2.0) -> None: ...

    async def close(self) -> None: ...


class MemoryKeyUsage:
    """Key usage of this process only (no Redis configured)."""

    shared = False

    def __init__(self) -> None:
        self._uses: dict[tuple[str, str], KeyUse] = {}

    def note(self, tenant: str, key_id: str, at: float) -> None:
        """Count one verified signature of `key_id` at `at` (unix seconds). Never raises."""
        old = self._uses.get((tenant, key_id), KeyUse())
        me = worker_name()
        workers = {**old.workers, me: old.workers.get(me, 0) + 1}
        self._uses[(tenant, key_id)] = KeyUse(old.count + 1, max(at, old.last or at), workers)

    async def read(self, tenant: str, key_ids: Iterable[str]) -> dict[str, KeyUse]:
        """{key_id: KeyUse} for the given ids (KeyUse() when never used)."""
        return {k: self._uses.get((tenant, k), KeyUse()) for k in key_ids}

    async def flush(self, timeout: float = 2.0) -> None:
        return None

    async def close(self) -> None:
        return None


class RedisKeyUsage:
    """Key usage in Redis, shared by every worker (see the module docstring for the keys).

    url: a Redis URL (gateway.core.redis_clients); prefix: `replay.key_prefix`; timeout: seconds per pipeline.
    """

    shared = True

    def __init__(self, url: str, prefix: str, timeout: float = 1.0) -> None:
        self.prefix = prefix
        self._timeout = timeout
        self.client = async_client(url, timeout)
        # (tenant, key_id) -> [count, newest unix s]; aggregated between two writes.
        self._pending: dict[tuple[str, str], list[float]] = {}
        self._writer = BackgroundWriter("kbgate-keyuse", lambda: bool(self._pending), self._write_batch,
                                        linger=BOOKKEEPING_LINGER)
        self._last_warning = 0.0
        self._me = worker_name()

    def note(self, tenant: str, key_id: str, at: float) -> None:
        """Count one verified signature of `key_id` at `at` (unix seconds).

        No I/O here: the count joins the next batch. Never raises.
        """
        entry = self._pending.get((tenant, key_id))
        if entry is None:
            self._pending[(tenant, key_id)] = [1, at]
        else:
            entry[0] += 1
            entry[1] = max(entry[1], at)
        self._writer.poke()

    async def _write_batch(self) -> None:
        batch, self._pending = self._pending, {}
        await self._write(batch)

    async def _write(self, batch: dict[tuple[str, str], list[float]]) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                pipe = self.client.pipeline(transaction=False)
                for (tenant, key_id), (count, newest) in batch.items():
                    k = keyuse_key(self.prefix, tenant, key_id)
                    pipe.hincrby(k, "count", int(count))
                    pipe.hincrby(k, f"w:{self._me}", int(count))
                    pipe.hset(k, "last", f"{newest:.3f}")
                    pipe.expire(k, KEEP)
                await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            # Fail open: this is bookkeeping, the callback was already answered.
            now = time.monotonic()
            if now - self._last_warning >= WARN_EVERY:
                self._last_warning = now
                log.warning("key usage not recorded", extra={"error": type(exc).__name__,
                                                             "keys": len(batch)})

    async def read(self, tenant: str, key_ids: Iterable[str]) -> dict[str, KeyUse]:
        """{key_id: KeyUse} from Redis. Raises RedisError/OSError when Redis is down."""
        ids = list(key_ids)
        pipe = self.client.pipeline(transaction=False)
        for k in ids:
            pipe.hgetall(keyuse_key(self.prefix, tenant, k))
        rows = await pipe.execute()
        return {k: _parse(row) for k, row in zip(ids, rows, strict=True)}

    async def flush(self, timeout: float = 2.0) -> None:
        """Wait until noted uses are written (tests, shutdown)."""
        await self._writer.flush(timeout)

    async def close(self) -> None:
        await self._writer.close(self._timeout)
        await self.client.aclose()


def read_key_usage(url: str, prefix: str, tenant: str, key_ids: Iterable[str],
                   timeout: float = 2.0) -> dict[str, KeyUse]:
    """Synchronous read for the CLI: {key_id: KeyUse} of every worker and replica.

    Raises redis.RedisError / OSError when Redis cannot be reached.
    """
    ids = list(key_ids)
    client = sync_client(url, timeout)
    try:
        pipe = client.pipeline(transaction=False)
        for k in ids:
            pipe.hgetall(keyuse_key(prefix, tenant, k))
        rows = pipe.execute()
    finally:
        client.close()
    return {k: _parse(row) for k, row in zip(ids, rows, strict=True)}


def _parse(row: dict[bytes, bytes]) -> KeyUse:
    if not row:
        return KeyUse()
    fields = {k.decode(): v.decode() for k, v in row.items()}
    workers = {k[2:]: int(v) for k, v in fields.items() if k.startswith("w:")}
    last = float(fields["last"]) if "last" in fields else None
    return KeyUse(int(fields.get("count", "0")), last, workers)


def make_key_usage(redis_url: str | None, prefix: str, timeout: float) -> KeyUsage:
    """Redis-backed usage when `redis_url` is set, else this process's memory."""
    if redis_url:
        return RedisKeyUsage(redis_url, prefix, timeout)
    return MemoryKeyUsage()
