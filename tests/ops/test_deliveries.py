"""gateway/ops/deliveries.py: bounded rings per tenant in memory and in a real Redis.

Also through the app: every callback is recorded after its response, without the Query
unless admin.show_queries is on, and a dead Redis never fails or slows a callback.
"""

from __future__ import annotations

import select
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
from asgi_lifespan import LifespanManager

from gateway.core.config import load_config
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import Delivery
from gateway.ops.deliveries import DeliveryReader, MemoryDeliveryLog, RedisDeliveryLog, to_record
from gateway.serve.app import Gateway, create_app
from tests.support.callbacks import body, signed
from tests.support.configs import ENV, SECRETS, two_tenants
from tests.support.configs import SECRET_ACME as SECRET
from tests.support.console import ENGLISH
from tests.support.harness import free_port

pytestmark = pytest.mark.anyio


def delivery(tenant: str = "acme", t: float = 1_800_000_000.0, **kw: Any) -> Delivery:
    d = Delivery(request_id=f"r{t}", tenant=tenant, received_at=t, first_level_id="tech",
                 second_level_id="software", query="密钥轮换 查询", key_id="k1", signature="verified")
    for k, v in kw.items():
        setattr(d, k, v)
    return d


async def test_memory_ring_is_bounded_and_newest_first() -> None:
    log = MemoryDeliveryLog(capacity=3)
    for i in range(5):
        log.submit(to_record(delivery(t=1000.0 + i), show_query=False))
    got = await log.recent("acme", 10)
    assert [r["received_at"] for r in got] == [1004.0, 1003.0, 1002.0]
    assert await log.recent("acme", 2) == got[:2]
    assert await log.recent("nobody", 5) == []


async def test_query_kept_only_when_enabled() -> None:
    assert "query" not in to_record(delivery(), show_query=False)
    assert to_record(delivery(), show_query=True)["query"] == "密钥轮换 查询"


async def test_redis_ring_bounded_shared_and_merged(redis_url: str, key_prefix: str,
                                                   redis_client: redis.Redis) -> None:
    writer = RedisDeliveryLog(redis_url, key_prefix, capacity=4)
    reader = RedisDeliveryLog(redis_url, key_prefix, capacity=4)  # another worker / `kbgate onboard`
    try:
        for i in range(6):
            writer.submit(to_record(delivery(t=2000.0 + i), show_query=False))
        writer.submit(to_record(delivery("beta", t=2010.0), show_query=False))
        await writer.flush()
        assert redis_client.llen(f"{key_prefix}:deliveries:acme") == 4  # LTRIM bounds the ring
        acme = await reader.recent("acme", 10)
        assert [r["received_at"] for r in acme] == [2005.0, 2004.0, 2003.0, 2002.0]
        both = await reader.recent(None, 3)
        assert [(r["tenant"], r["received_at"]) for r in both] == [("beta", 2010.0), ("acme", 2005.0),
                                                                  ("acme", 2004.0)]
        raw = redis_client.lindex(f"{key_prefix}:deliveries:acme", 0)
        assert raw is not None and b" " not in raw  # compact orjson
        assert orjson.loads(raw)["key_id"] == "k1"
    finally:
        await writer.close()
        await reader.close()


async def test_redis_down_submit_never_raises_and_counts_drops() -> None:
    dropped: list[tuple[str, int]] = []
    with socket.socket() as hole:  # Redis's address: listening, so a connection attempt would show
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        log = RedisDeliveryLog(f"redis://127.0.0.1:{hole.getsockname()[1]}/0", "p", timeout=0.2,
                               on_drop=lambda reason, n: dropped.append((reason, n)))
        for i in range(3):
            log.submit(to_record(delivery(t=float(i)), show_query=False))
        assert select.select([hole], [], [], 0)[0] == [] and dropped == []  # submit does no I/O
    # Now nothing listens there: Redis is down.
    try:
        await log.flush(10.0)
        assert sum(n for reason, n in dropped if reason == "redis_error") == 3
        with pytest.raises(DependencyUnavailable):
            await log.recent("acme", 5)
    finally:
        await log.close()


async def test_the_blocking_reader_of_onboard_reads_what_workers_wrote(redis_url: str, key_prefix: str,
                                                                      redis_client: redis.Redis) -> None:
    writer = RedisDeliveryLog(redis_url, key_prefix, capacity=4)
    for i in range(3):
        writer.submit(to_record(delivery(t=3000.0 + i), show_query=False))
    await writer.flush()
    await writer.close()
    redis_client.lpush(f"{key_prefix}:deliveries:acme", b"not json", b"[1]")  # skipped, not fatal
    reader = DeliveryReader(redis_url, key_prefix)
    try:
        assert [r["received_at"] for r in reader.recent("acme", 4)] == [3002.0, 3001.0]  # the newest 4 items
        assert reader.recent("nobody", 5) == []
    finally:
        reader.close()
    down = DeliveryReader(f"redis://127.0.0.1:{free_port()}/0", "p", timeout=0.2)
    try:
        with pytest.raises(DependencyUnavailable):
            down.recent("acme", 5)
    finally:
        down.close()


# ------------------------------------------------------------------ through the app


@pytest.fixture(name="app_client")
async def _app_client(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str,
                      monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    made: list[LifespanManager] = []

    async def factory(**kw: Any) -> tuple[httpx.AsyncClient, Gateway]:
        sub = tmp_path / f"s{len(made)}"
        sub.mkdir()
        cfg = load_config(two_tenants(sub, docs_index, **kw))
        app = create_app(cfg)
        m = LifespanManager(app)  # type: ignore[arg-type]
        await m.__aenter__()
        made.append(m)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate",
                                 headers=ENGLISH), app

    yield factory
    for m in made:
        await m.__aexit__(None, None, None)


async def test_callback_recorded_in_redis_without_query_or_secret(app_client: Any, redis_url: str,
                                                                  key_prefix: str) -> None:
    c, gw = await app_client(redis_url=redis_url, key_prefix=key_prefix)
    raw = body()
    r = await c.post("/volcengine/acme", content=raw, headers={**signed(SECRET, raw), "x-request-id": "trace-42"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "trace-42"
    await gw.deliveries.flush()
    [rec] = await RedisDeliveryLog(redis_url, key_prefix).recent("acme", 5)
    assert rec["request_id"] == "trace-42"
    assert (rec["first_level_id"], rec["second_level_id"], rec["outcome"], rec["ret"]) == ("tech", "software", "ok", 0)
    assert rec["key_id"] == "acme-2026-11" and rec["results"] >= 1 and rec["signature"] == "verified"
    assert "query" not in rec
    text = orjson.dumps(rec).decode()
    assert not any(s in text for s in SECRETS) and "密钥轮换" not in text


async def test_query_recorded_when_show_queries(app_client: Any) -> None:
    c, gw = await app_client(show_queries=True)
    raw = body(query="如何轮换密钥")
    await c.post("/volcengine/acme", content=raw, headers=signed(SECRET, raw))
    [rec] = await gw.deliveries.recent("acme", 5)
    assert rec["query"] == "如何轮换密钥"


async def test_rejection_recorded_with_reason(app_client: Any) -> None:
    c, gw = await app_client()
    raw = body()
    r = await c.post("/volcengine/acme", content=raw, headers=signed("wrong-secret-value", raw))
    assert r.status_code == 401
    [rec] = await gw.deliveries.recent("acme", 5)
    assert (rec["outcome"], rec["ret"], rec["signature"]) == ("signature_mismatch", 40105, "failed")
    assert rec["key_id"] is None


async def test_hung_redis_does_not_fail_or_slow_the_callback(app_client: Any, key_prefix: str) -> None:
    # A socket that accepts connections but never answers: every Redis command hangs until the
    # socket closes (the record's timeout is 30 s). The callback must still answer 200 meanwhile.
    c, gw = await app_client()
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        hung = RedisDeliveryLog(f"redis://127.0.0.1:{hole.getsockname()[1]}/0", key_prefix, timeout=30,
                                on_drop=gw.metrics.drop)
        gw.deliveries = hung
        raw = body()
        r = await c.post("/volcengine/acme", content=raw, headers=signed(SECRET, raw))
        assert r.status_code == 200 and orjson.loads(r.content)["Ret"] == 0
        # The answer came while the record write still hangs (it only ends when the hole closes):
        # it did not wait for it, and the record is not lost yet.
        assert b"kbgate_deliveries_dropped_total{" not in gw.metrics.exposition()
    # The hole closes: the hung write fails (reset or refused) and the record is counted as dropped.
    await hung.flush(30.0)
    assert b'kbgate_deliveries_dropped_total{reason="redis_error"} 1.0' in gw.metrics.exposition()
