"""gateway/core/replay.py against a real Redis server and the in-process store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis

from gateway.core.clock import FixedClock
from gateway.core.errors import DependencyUnavailable
from gateway.core.replay import MemoryNonceStore, RedisNonceStore, claim_expiry, make_store, nonce_key
from tests.support.harness import free_port


def test_claim_expiry_covers_the_whole_window() -> None:
    # A timestamp stays acceptable until ts + tolerance, so the claim must live that long.
    assert claim_expiry(1_700_000_000, 3600) == 1_700_003_601


def test_key_is_case_sensitive_and_tenant_scoped() -> None:
    a = nonce_key("p", "acme", "1700000000", "AbCdEf")
    assert a != nonce_key("p", "acme", "1700000000", "abcdef")
    assert a != nonce_key("p", "other", "1700000000", "AbCdEf")


def test_redis_claim_once(redis_url: str, key_prefix: str, redis_client: redis.Redis) -> None:
    now = time.time()
    store = RedisNonceStore(redis_url, 1.0, FixedClock(now))

    async def go() -> tuple[bool, bool]:
        key = f"{key_prefix}:k"
        first = await store.claim(key, int(now) + 3601)
        second = await store.claim(key, int(now) + 3601)
        await store.close()
        return first, second

    assert asyncio.run(go()) == (True, False)
    ttl = redis_client.ttl(f"{key_prefix}:k")
    assert 3590 <= ttl <= 3603


def test_redis_ttl_follows_our_clock_not_redis(redis_url: str, key_prefix: str, redis_client: redis.Redis) -> None:
    # The claim's lifetime is ts + tolerance − now by the one clock seam.
    clock = FixedClock(1_700_000_000.0)
    store = RedisNonceStore(redis_url, 1.0, clock)

    async def go() -> None:
        await store.claim(f"{key_prefix}:c", claim_expiry(1_700_000_000 - 600, 3600))
        await store.close()

    asyncio.run(go())
    assert 2995 <= redis_client.ttl(f"{key_prefix}:c") <= 3002


def test_redis_concurrent_duplicates_exactly_one_wins(redis_url: str, key_prefix: str) -> None:
    async def go() -> list[bool]:
        stores = [RedisNonceStore(redis_url, 1.0) for _ in range(4)]
        key = f"{key_prefix}:race"
        results = await asyncio.gather(*[stores[i % 4].claim(key, int(time.time()) + 60) for i in range(40)])
        for s in stores:
            await s.close()
        return list(results)

    results = asyncio.run(go())
    assert results.count(True) == 1
    assert results.count(False) == 39


def test_redis_down_fails_closed_fast() -> None:
    port = free_port()  # nothing listens here
    store = RedisNonceStore(f"redis://127.0.0.1:{port}/0", timeout=1.0)

    async def go() -> float:
        t0 = time.perf_counter()
        with pytest.raises(DependencyUnavailable) as exc:
            await store.claim("k", int(time.time()) + 60)
        assert exc.value.code == "replay_store_unavailable"
        assert not await store.ping()
        await store.close()
        return time.perf_counter() - t0

    assert asyncio.run(go()) < 2.5


def test_redis_blackhole_times_out_within_about_a_second() -> None:
    # A listener that accepts and never answers: a hung Redis, not a refused one.
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    store = RedisNonceStore(f"redis://127.0.0.1:{port}/0", timeout=1.0)

    async def go() -> float:
        t0 = time.perf_counter()
        with pytest.raises(DependencyUnavailable):
            await store.claim("k", int(time.time()) + 60)
        took = time.perf_counter() - t0
        await store.close()
        return took

    try:
        took = asyncio.run(go())
    finally:
        srv.close()
    assert took < 1.6


def test_memory_store_claims_once_and_expires() -> None:
    clock = FixedClock(1000.0)
    store = MemoryNonceStore(clock)

    async def go() -> list[bool]:
        out = [await store.claim("a", 1010), await store.claim("a", 1010)]
        clock.advance(11)
        out.append(await store.claim("a", 1030))
        return out

    assert asyncio.run(go()) == [True, False, True]
    assert len(store) == 1


def test_memory_store_refuses_when_full_rather_than_forgetting() -> None:
    store = MemoryNonceStore(FixedClock(0.0), max_entries=2)

    async def go() -> None:
        await store.claim("a", 100)
        await store.claim("b", 100)
        with pytest.raises(DependencyUnavailable):
            await store.claim("c", 100)

    asyncio.run(go())


def test_memory_store_answers_ping_and_forgets_everything_on_close() -> None:
    store = MemoryNonceStore(FixedClock(0.0))

    async def go() -> bool:
        await store.claim("a", 100)
        alive = await store.ping()
        await store.close()
        return alive

    assert asyncio.run(go()) is True and len(store) == 0


def test_a_stale_expiry_entry_never_drops_a_newer_claim_of_the_same_key() -> None:
    """The expiry heap may hold an older entry for a key claimed again: purging it must not
    forget the live claim (forgetting it would admit a replay)."""
    clock = FixedClock(0.0)
    store = MemoryNonceStore(clock)
    store._claims["k"] = 300  # the live claim, until 300
    store._expiries.append((100, "k"))  # an older entry for the same key

    async def go() -> bool:
        clock.t = 200.0
        await store.claim("other", 400)  # purges up to 200: pops (100, "k")
        return await store.claim("k", 500)

    assert asyncio.run(go()) is False  # "k" is still claimed until 300


def test_make_store_picks_by_config(redis_url: str) -> None:
    assert isinstance(make_store(None, 1.0), MemoryNonceStore)
    s = make_store(redis_url, 1.0)
    assert isinstance(s, RedisNonceStore)
    assert s.shared
    asyncio.run(s.close())


def test_redis_restart_costs_no_failed_claim(tmp_path: Path) -> None:
    import shutil
    import subprocess

    exe = shutil.which("redis-server")
    assert exe is not None, "this test needs the redis-server binary (make test installs it: tests/ensure-tools.sh)"
    port = free_port()
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                if redis.Redis(port=port, socket_timeout=0.2).ping():
                    return proc
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    server = start()
    store = RedisNonceStore(f"redis://127.0.0.1:{port}/0", 1.0)

    async def go() -> list[bool]:
        out = [await store.claim("before", int(time.time()) + 60)]
        server.terminate()
        server.wait(5)
        restarted = start()
        try:
            # every pooled connection is now dead; the first claim must still succeed
            out.append(await store.claim("after", int(time.time()) + 60))
            out.append(await store.claim("after", int(time.time()) + 60))
        finally:
            await store.close()
            restarted.terminate()
            restarted.wait(5)
        return out

    assert asyncio.run(go()) == [True, True, False]
