"""The deliveries record: the last N callbacks of each tenant, for operators and `kbgate onboard`.

Rationale: docs/design-notes.md, "gateway/ops/deliveries.py".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypedDict

import orjson
from redis.exceptions import RedisError

from gateway.core.background import BOOKKEEPING_LINGER, BackgroundWriter
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import Delivery
from gateway.core.redis_clients import SyncRedis, async_client, sync_client

log = logging.getLogger("kbgate.deliveries")

MAX_PENDING = 10_000  # records waiting for the Redis writer before new ones are dropped
BATCH = 200  # records per pipeline
WARN_EVERY = 10.0  # seconds between two "write failed" log lines


class DeliveryRecord(TypedDict, total=False):
    """One delivery as kept and shown. Times are unix seconds; latencies milliseconds.

    signature: 'verified' | 'unsigned' | 'failed' | 'unchecked'. outcome: 'ok' or a
    reason of gateway.core.errors.RET_TABLE. query: present only when admin.show_queries is on.
    """

    request_id: str
    tenant: str
    received_at: float
    outcome: str
    ret: int
    status: int
    key_id: str | None
    signature: str
    signature_reason: str | None
    skew_seconds: float | None
    keys_tried: list[str]
    first_level_id: str | None
    second_level_id: str | None
    results: int
    latency_ms: float
    search_ms: float | None
    query: str


def to_record(d: Delivery, *, show_query: bool) -> DeliveryRecord:
    """The record kept for `d`: every field but `extra`; `query` only when `show_query`.

    Delivery holds no secret (key ids only), so nothing else needs masking.
    """
    rec: DeliveryRecord = {
        "request_id": d.request_id,
        "tenant": d.tenant,
        "received_at": round(d.received_at, 3),
        "outcome": d.outcome,
        "ret": d.ret,
        "status": d.status,
        "key_id": d.key_id,
        "signature": d.signature,
        "signature_reason": d.signature_reason,
        "skew_seconds": d.skew_seconds,
        "keys_tried": list(d.keys_tried),
        "first_level_id": d.first_level_id,
        "second_level_id": d.second_level_id,
        "results": d.results,
        "latency_ms": round(d.latency_ms, 3),
        "search_ms": None if d.search_ms is None else round(d.search_ms, 3),
    }
    if show_query and d.query is not None:
        rec["query"] = d.query
    return rec


class DeliveryLog(Protocol):
    """A bounded ring of delivery records per tenant (memory or Redis).

    submit(record): keep it; never blocks, never raises (called after the response is sent).
    recent(tenant, n): newest first, at most n (n ≥ 1) records of `tenant`, or of every
        tenant merged by received_at when tenant is None. Raises DependencyUnavailable when
        the backing store cannot answer.
    flush(): wait until submitted records are readable (tests, shutdown).
    """

    shared: bool

    def submit(self, record: DeliveryRecord) -> None: ...

    async def recent(self, tenant: str | None, n: int) -> list[dict[str, Any]]: ...

    async def flush(self, timeout: float = 2.0) -> None: ...

    async def close(self) -> None: ...


class MemoryDeliveryLog:
    """Deliveries of this process only: a deque of `capacity` records per tenant."""

    shared = False

    def __init__(self, capacity: int = 200) -> None:
        self.capacity = capacity
        self._rings: dict[str, deque[DeliveryRecord]] = {}

    def submit(self, record: DeliveryRecord) -> None:
        ring = self._rings.get(record["tenant"])
        if ring is None:
            ring = self._rings[record["tenant"]] = deque(maxlen=self.capacity)
        ring.appendleft(record)

    async def recent(self, tenant: str | None, n: int) -> list[dict[str, Any]]:
        rings = [self._rings.get(tenant, deque())] if tenant is not None else list(self._rings.values())
        return _newest([dict(r) for ring in rings for r in list(ring)[:n]], n)

    async def flush(self, timeout: float = 2.0) -> None:
        return None

    async def close(self) -> None:
        return None


class RedisDeliveryLog:
    """Deliveries in Redis, shared by every worker; see the module docstring for the keys.

    url: a Redis URL (gateway.core.redis_clients). capacity: records kept per tenant. timeout: seconds per command.
    on_drop(reason, count): called when records are dropped ('overflow' | 'redis_error').
    """

    shared = True

    def __init__(self, url: str, prefix: str, capacity: int = 200, timeout: float = 1.0,
                 on_drop: Callable[[str, int], None] | None = None) -> None:
        self.prefix = prefix
        self.capacity = capacity
        self._timeout = timeout
        self._on_drop = on_drop or (lambda reason, count: None)
        self.client = async_client(url, timeout)
        self._queue: deque[bytes] = deque()
        self._tenants: deque[str] = deque()
        self._writer = BackgroundWriter("kbgate-deliveries", lambda: bool(self._queue), self._write_batch,
                                        linger=BOOKKEEPING_LINGER)
        self._last_warning = 0.0
        self._suppressed = 0

    def key(self, tenant: str) -> str:
        """'{prefix}:deliveries:{tenant}': the list of one tenant, newest first."""
        return list_key(self.prefix, tenant)

    @property
    def tenants_key(self) -> str:
        """'{prefix}:delivery-tenants': the set of tenants that have a list."""
        return f"{self.prefix}:delivery-tenants"

    def submit(self, record: DeliveryRecord) -> None:
        if len(self._queue) >= MAX_PENDING:
            self._on_drop("overflow", 1)
            self._warn("deliveries record: writer behind, record dropped")
            return
        self._queue.append(orjson.dumps(record))
        self._tenants.append(record["tenant"])
        self._writer.poke()

    async def _write_batch(self) -> None:
        batch: dict[str, list[bytes]] = {}
        for _ in range(min(BATCH, len(self._queue))):
            batch.setdefault(self._tenants.popleft(), []).append(self._queue.popleft())
        await self._write(batch)

    async def _write(self, batch: dict[str, list[bytes]]) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                pipe = self.client.pipeline(transaction=False)
                for tenant, items in batch.items():
                    pipe.lpush(self.key(tenant), *items)
                    pipe.ltrim(self.key(tenant), 0, self.capacity - 1)
                pipe.sadd(self.tenants_key, *batch)
                await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            lost = sum(len(v) for v in batch.values())
            self._on_drop("redis_error", lost)
            self._warn(f"deliveries record: Redis write failed ({type(exc).__name__}), {lost} record(s) dropped")

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY:
            log.warning(message, extra={"suppressed": self._suppressed})
            self._last_warning, self._suppressed = now, 0
        else:
            self._suppressed += 1

    async def recent(self, tenant: str | None, n: int) -> list[dict[str, Any]]:
        try:
            async with asyncio.timeout(self._timeout):
                if tenant is not None:
                    names = [tenant]
                else:
                    members = await self.client.smembers(self.tenants_key)
                    names = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
                pipe = self.client.pipeline(transaction=False)
                for name in names:
                    pipe.lrange(self.key(name), 0, n - 1)
                lists = await pipe.execute() if names else []
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the deliveries record is unavailable") from None
        return _newest(_parsed(lists), n)

    async def flush(self, timeout: float = 2.0) -> None:
        await self._writer.flush(timeout)

    async def close(self) -> None:
        await self._writer.close(self._timeout)
        await self.client.aclose()


class DeliveryReader:
    """One tenant's deliveries in Redis (`RedisDeliveryLog`'s lists), read with a blocking client.

    url, prefix, timeout: as `RedisDeliveryLog` (timeout: seconds to connect and per command).
    A KeyboardInterrupt in the middle of a read leaves nothing half-done: it only reads.
    The client is made at the first read (a cluster client connects when made). Close with `close()`.
    """

    def __init__(self, url: str, prefix: str, timeout: float = 1.0) -> None:
        self.prefix = prefix
        self._url, self._timeout = url, timeout
        self.client: SyncRedis | None = None

    def recent(self, tenant: str, n: int) -> list[dict[str, Any]]:
        """The newest `n` (≥ 1) records of `tenant`, newest first. Raises DependencyUnavailable
        ('replay_store_unavailable') when Redis does not answer in time."""
        try:
            if self.client is None:
                self.client = sync_client(self._url, self._timeout)
            items = self.client.lrange(list_key(self.prefix, tenant), 0, n - 1)
        except (RedisError, OSError):
            raise DependencyUnavailable("replay_store_unavailable", "the deliveries record is unavailable") from None
        return _newest(_parsed([items]), n)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def list_key(prefix: str, tenant: str) -> str:
    """'{prefix}:deliveries:{tenant}': the list of one tenant's records, newest first."""
    return f"{prefix}:deliveries:{tenant}"


def _parsed(lists: list[Any]) -> list[dict[str, Any]]:
    """The records in Redis lists of JSON bytes; an item that is not a JSON object is skipped."""
    out: list[dict[str, Any]] = []
    for items in lists:
        for raw in items:
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def _newest(records: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    records.sort(key=lambda r: r.get("received_at") or 0.0, reverse=True)
    return records[:n]


def make_delivery_log(config: Config, on_drop: Callable[[str, int], None] | None = None) -> DeliveryLog:
    """The configured record: Redis when replay.redis_url is set, else this process's memory.

    Also what `kbgate onboard` opens (with the same config) to read deliveries; without
    Redis it must read them through GET /admin/deliveries.json of the running server instead.
    """
    if config.replay.redis_url:
        return RedisDeliveryLog(config.replay.redis_url, config.replay.key_prefix,
                                config.admin.keep_deliveries, config.replay.timeout_seconds, on_drop)
    return MemoryDeliveryLog(config.admin.keep_deliveries)
