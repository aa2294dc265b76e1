"""The limit on failed console logins (gateway.console.throttle): exponential backoff per user
name, per client address and per device, in memory on the fixed clock and in Redis shared
between workers; the admin token has no name key."""

from __future__ import annotations

import pytest

from gateway.console.throttle import (
    FORGET_SECONDS,
    FREE,
    MAX_WAIT_SECONDS,
    MemoryThrottle,
    RedisThrottle,
    keys,
    wait_after,
)
from gateway.core.clock import FixedClock
from tests.support.configs import NOW

pytestmark = pytest.mark.anyio


def test_the_wait_doubles_after_the_free_failures_up_to_its_cap() -> None:
    free = FREE["user"]
    assert [wait_after("user", n) for n in range(1, free + 5)] == [0.0] * free + [1.0, 2.0, 4.0, 8.0]
    assert wait_after("user", free + 40) == MAX_WAIT_SECONDS
    assert wait_after("addr", FREE["addr"]) == 0.0 and wait_after("addr", FREE["addr"] + 1) == 1.0


def test_the_admin_token_has_no_name_key() -> None:
    assert [k for k, _ in keys(None, "10.0.0.1")] == ["addr"]
    assert [k for k, _ in keys("ann", "10.0.0.1", "dev1")] == ["user", "addr", "device"]


async def test_a_name_waits_longer_after_each_failure_past_its_free_ones() -> None:
    clock = FixedClock(float(NOW))
    t = MemoryThrottle(clock.now)
    ann = keys("ann", "10.0.0.1")
    for _ in range(FREE["user"]):
        await t.failed(ann)
    assert await t.retry_after(ann) is None  # typos cost nothing
    waits = []
    for _ in range(4):
        await t.failed(ann)
        wait = await t.retry_after(ann)
        assert wait is not None
        waits.append(wait)
        assert await t.retry_after(keys("ann", "10.0.0.2")) == wait  # the name waits from any address
        clock.advance(wait)
        assert await t.retry_after(ann) is None  # then one more attempt is checked
    assert waits == [1, 2, 4, 8]
    assert await t.retry_after(keys("bob", "10.0.0.1")) is None  # the address has failures to spare


async def test_an_address_waits_after_its_free_failures_whatever_the_names_and_counts_are_forgotten() -> None:
    clock = FixedClock(float(NOW))
    t = MemoryThrottle(clock.now)
    for i in range(FREE["addr"] + 1):
        await t.failed(keys(f"guess{i}", "10.0.0.9"))
    assert await t.retry_after(keys("someone-new", "10.0.0.9")) == 1
    assert await t.retry_after(keys("someone-new", "10.0.0.8")) is None
    clock.advance(FORGET_SECONDS)
    await t.failed(keys("guess", "10.0.0.9"))
    assert await t.retry_after(keys("someone-new", "10.0.0.9")) is None  # counting started again


async def test_memory_counts_stay_bounded() -> None:
    t = MemoryThrottle(FixedClock(float(NOW)).now, max_keys=10)
    for i in range(100):
        await t.failed(keys(f"n{i}", None))
    assert len(t._counts) == 10


async def test_redis_counts_are_shared_by_every_worker(redis_url: str, key_prefix: str) -> None:
    clock = FixedClock(float(NOW))
    one = RedisThrottle(redis_url, key_prefix, 1.0, clock.now)
    two = RedisThrottle(redis_url, key_prefix, 1.0, clock.now)
    try:
        ann = keys("ann", "10.0.0.1")
        for _ in range(FREE["user"] + 3):
            await one.failed(ann)
        assert await two.retry_after(keys("ann", "10.0.0.2")) == 4
        assert await two.retry_after(keys("bob", "10.0.0.2")) is None
        clock.advance(4)
        assert await two.retry_after(ann) is None
    finally:
        await one.close()
        await two.close()
