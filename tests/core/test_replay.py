"""gateway/core/replay.py: the claim state machine, in Redis (real server) and in memory.

Both stores run the same state-machine tests; the Redis-only tests cover what only a
network store can do: time out, land late, restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis

from gateway.core.clock import FixedClock
from gateway.core.errors import ClientDisconnected, DependencyUnavailable, Replayed
from gateway.core.replay import (
    PENDING_SECONDS,
    MemoryNonceStore,
    RedisNonceStore,
    answer_once,
    claim_expiry,
    make_store,
    nonce_key,
)
from tests.support.harness import free_port
from tests.support.redis_procs import RedisProc

NOW = 1_800_000_000.0
EXPIRE = int(NOW) + 3601


Store = MemoryNonceStore | RedisNonceStore


@pytest.fixture(name="make", params=["memory", "redis"])
async def _make(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[Callable[..., Store]]:
    made: list[Store] = []

    def make(clock: FixedClock, pending_seconds: float = 2.0) -> Store:
        store: Store
        if request.param == "memory":
            store = MemoryNonceStore(clock, pending_seconds=pending_seconds)
        else:
            store = RedisNonceStore(redis_url, 1.0, clock, pending_seconds=pending_seconds)
        made.append(store)
        return store

    yield make
    for s in made:
        await s.close()


def test_claim_expiry_covers_the_whole_window() -> None:
    # A timestamp stays acceptable until ts + tolerance, so the claim must live that long.
    assert claim_expiry(1_700_000_000, 3600) == 1_700_003_601


def test_key_is_case_sensitive_and_tenant_scoped() -> None:
    a = nonce_key("p", "acme", "1700000000", "AbCdEf")
    assert a != nonce_key("p", "acme", "1700000000", "abcdef")
    assert a != nonce_key("p", "other", "1700000000", "AbCdEf")


# ------------------------------------------------------------------ the state machine, both stores


@pytest.mark.anyio
async def test_answered_delivery_is_never_claimed_again(make: Callable[..., Store], key_prefix: str) -> None:
    clock = FixedClock(NOW)
    store = make(clock)
    key = f"{key_prefix}:a"
    first = await store.claim(key, EXPIRE)
    assert first.state == "claimed" and len(first.owner) == 32
    assert (await store.claim(key, EXPIRE)).state == "pending"
    assert await store.answered(key, first.owner, EXPIRE) == "recorded"
    assert (await store.claim(key, EXPIRE)).state == "answered"
    clock.advance(3000)  # long past any pending deadline, still inside the window
    assert (await store.claim(key, EXPIRE)).state == "answered"


@pytest.mark.anyio
async def test_released_claim_can_be_claimed_again(make: Callable[..., Store], key_prefix: str) -> None:
    store = make(FixedClock(NOW))
    key = f"{key_prefix}:r"
    first = await store.claim(key, EXPIRE)
    await store.release(key, first.owner)
    again = await store.claim(key, EXPIRE)
    assert again.state == "claimed" and again.owner != first.owner


@pytest.mark.anyio
async def test_expired_pending_claim_is_taken_over_and_the_slow_owner_loses(
        make: Callable[..., Store], key_prefix: str) -> None:
    clock = FixedClock(NOW)
    store = make(clock, pending_seconds=2.0)
    key = f"{key_prefix}:t"
    slow = await store.claim(key, EXPIRE)
    clock.advance(1.9)
    assert (await store.claim(key, EXPIRE)).state == "pending"
    clock.advance(0.2)  # past the deadline
    retry = await store.claim(key, EXPIRE)
    assert retry.state == "claimed"
    assert await store.answered(key, slow.owner, EXPIRE) == "pending"  # the slow owner must not answer 200
    await store.release(key, slow.owner)  # and its release does not free the retry's claim
    assert (await store.claim(key, EXPIRE)).state == "pending"
    assert await store.answered(key, retry.owner, EXPIRE) == "recorded"
    assert await store.answered(key, slow.owner, EXPIRE) == "answered"


@pytest.mark.anyio
async def test_owner_release_undoes_its_own_answered_record(make: Callable[..., Store], key_prefix: str) -> None:
    # An owner whose `answered` write timed out answers 503 and releases: if the write
    # landed anyway, the release removes it, so the retry is answered.
    store = make(FixedClock(NOW))
    key = f"{key_prefix}:u"
    c = await store.claim(key, EXPIRE)
    assert await store.answered(key, c.owner, EXPIRE) == "recorded"
    await store.release(key, "someone-else")
    assert (await store.claim(key, EXPIRE)).state == "answered"
    await store.release(key, c.owner)
    assert (await store.claim(key, EXPIRE)).state == "claimed"


@pytest.mark.anyio
async def test_answered_after_the_record_vanished_is_recorded(make: Callable[..., Store], key_prefix: str) -> None:
    store = make(FixedClock(NOW))
    key = f"{key_prefix}:v"
    c = await store.claim(key, EXPIRE)
    await store.release(key, c.owner)
    assert await store.answered(key, c.owner, EXPIRE) == "recorded"
    assert (await store.claim(key, EXPIRE)).state == "answered"


def test_memory_record_ends_with_the_tolerance_window() -> None:
    # (Redis expires records in its own time: test_redis_ttl_follows_our_clock_not_redis.)
    clock = FixedClock(1000.0)
    store = MemoryNonceStore(clock)

    async def go() -> str:
        c = await store.claim("a", 1010)
        await store.answered("a", c.owner, 1010)
        clock.advance(11)
        return (await store.claim("a", 1030)).state

    assert asyncio.run(go()) == "claimed"
    assert len(store) == 1


# ------------------------------------------------------------------ Redis only


def test_redis_ttl_follows_our_clock_not_redis(redis_url: str, key_prefix: str, redis_client: redis.Redis) -> None:
    # The record's lifetime is ts + tolerance − now by the one clock seam.
    clock = FixedClock(1_700_000_000.0)
    store = RedisNonceStore(redis_url, 1.0, clock)

    async def go() -> None:
        await store.claim(f"{key_prefix}:c", claim_expiry(1_700_000_000 - 600, 3600))
        await store.close()

    asyncio.run(go())
    assert 2995 <= redis_client.ttl(f"{key_prefix}:c") <= 3002


def test_redis_value_of_an_older_version_counts_as_answered(redis_url: str, key_prefix: str,
                                                            redis_client: redis.Redis) -> None:
    redis_client.set(f"{key_prefix}:old", b"1", ex=60)  # what SET NX wrote before the state machine
    store = RedisNonceStore(redis_url, 1.0, FixedClock(NOW))

    async def go() -> str:
        try:
            return (await store.claim(f"{key_prefix}:old", EXPIRE)).state
        finally:
            await store.close()

    assert asyncio.run(go()) == "answered"


def test_redis_concurrent_duplicates_exactly_one_claims(redis_url: str, key_prefix: str) -> None:
    async def go() -> list[str]:
        stores = [RedisNonceStore(redis_url, 1.0) for _ in range(4)]
        key = f"{key_prefix}:race"
        results = await asyncio.gather(*[stores[i % 4].claim(key, int(time.time()) + 60) for i in range(40)])
        for s in stores:
            await s.close()
        return [r.state for r in results]

    states = asyncio.run(go())
    assert states.count("claimed") == 1
    assert states.count("pending") == 39


def test_default_deadline_is_the_pending_budget_plus_the_redis_timeout(redis_url: str) -> None:
    store = RedisNonceStore(redis_url, 0.5)
    assert store.pending_seconds == PENDING_SECONDS + 0.5
    asyncio.run(store.close())
    assert MemoryNonceStore().pending_seconds == PENDING_SECONDS


def test_redis_down_fails_closed_fast() -> None:
    port = free_port()  # nothing listens here
    store = RedisNonceStore(f"redis://127.0.0.1:{port}/0", timeout=1.0)

    async def go() -> float:
        t0 = time.perf_counter()
        with pytest.raises(DependencyUnavailable) as exc:
            await store.claim("k", int(time.time()) + 60)
        assert exc.value.code == "replay_store_unavailable"
        with pytest.raises(DependencyUnavailable):
            await store.answered("k", "owner", int(time.time()) + 60)
        await store.release("k", "owner")  # best effort: never raises
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


def test_a_claim_that_lands_late_does_not_block_the_retry(tmp_path: Path) -> None:
    # Redis frozen longer than the timeout; the claim gives up (503) but its
    # command is already in Redis' socket buffer and runs when Redis resumes. That record
    # must not turn the platform's retry into "already answered".
    server = RedisProc(tmp_path).start()
    store = RedisNonceStore(server.url, 0.3, pending_seconds=1.0)
    key = "kbgate-test:late"

    async def go() -> list[str]:
        assert (await store.claim("kbgate-test:warm", int(time.time()) + 60)).state == "claimed"
        server.freeze()
        try:
            with pytest.raises(DependencyUnavailable):
                await store.claim(key, int(time.time()) + 60)
        finally:
            server.thaw()
        out = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            c = await store.claim(key, int(time.time()) + 60)
            out.append(c.state)
            if c.state == "claimed":
                assert await store.answered(key, c.owner, int(time.time()) + 60) == "recorded"
                break
            await asyncio.sleep(0.1)
        await store.close()
        return out

    try:
        states = asyncio.run(go())
        late = server.client().get(key)
    finally:
        server.stop()
    assert states[0] == "pending", states  # the late claim did land (the scenario)
    assert states[-1] == "claimed", states  # and the retry got the delivery once its deadline passed
    assert set(states[:-1]) <= {"pending"}, states  # before that: "being answered", never "answered"
    assert late is not None and late.startswith(b"a:")


def test_memory_store_refuses_when_full_rather_than_forgetting() -> None:
    store = MemoryNonceStore(FixedClock(0.0), max_entries=2)

    async def go() -> None:
        await store.claim("a", 100)
        await store.claim("b", 100)
        with pytest.raises(DependencyUnavailable):
            await store.claim("c", 100)

    asyncio.run(go())


def test_make_store_picks_by_config(redis_url: str) -> None:
    assert isinstance(make_store(None, 1.0), MemoryNonceStore)
    s = make_store(redis_url, 1.0)
    assert isinstance(s, RedisNonceStore)
    assert s.shared
    asyncio.run(s.close())


def test_redis_restart_costs_no_failed_claim(tmp_path: Path) -> None:
    server = RedisProc(tmp_path).start()
    store = RedisNonceStore(server.url, 1.0)

    async def go() -> list[str]:
        out = [(await store.claim("before", int(time.time()) + 60)).state]
        server.stop()
        server.start()  # same port, empty
        # every pooled connection is now dead; the first claim must still succeed
        out.append((await store.claim("after", int(time.time()) + 60)).state)
        out.append((await store.claim("after", int(time.time()) + 60)).state)
        await store.close()
        return out

    try:
        assert asyncio.run(go()) == ["claimed", "claimed", "pending"]
    finally:
        server.stop()


# ------------------------------------------------------------------ answer_once (the handler's choreography)


def answer(body: bytes) -> Callable[[], Awaitable[bytes]]:
    """An answer builder, as the handler's search is: a coroutine function giving `body`."""

    async def build() -> bytes:
        return body

    return build


def test_answer_once_answers_once_and_releases_on_failure() -> None:
    clock = FixedClock(NOW)
    store = MemoryNonceStore(clock)

    async def boom() -> bytes:
        raise ValueError("the search failed")

    async def go() -> None:
        with pytest.raises(ValueError):
            await answer_once(store, "k", int(NOW) + 60, boom)
        assert await answer_once(store, "k", int(NOW) + 60, answer(b"ok")) == b"ok"  # released: answered now
        with pytest.raises(Replayed) as err:
            await answer_once(store, "k", int(NOW) + 60, answer(b"again"))
        assert err.value.code == "replayed"
        with pytest.raises(ClientDisconnected):
            await answer_once(store, "gone", int(NOW) + 60, answer(b"late"), lambda: True)
        assert (await store.claim("gone", int(NOW) + 60)).state == "claimed"  # the hang-up released it

    asyncio.run(go())


def test_answer_once_loses_to_a_retry_that_took_the_claim_over() -> None:
    clock = FixedClock(NOW)

    class SlowOwner(MemoryNonceStore):
        async def answered(self, key: str, owner: str, expire_at: int) -> str:
            clock.advance(PENDING_SECONDS + 1)  # the owner took longer than its deadline...
            assert (await self.claim(key, expire_at)).state == "claimed"  # ...and a retry took over
            return await super().answered(key, owner, expire_at)

    store = SlowOwner(clock)

    async def go() -> None:
        with pytest.raises(Replayed) as err:
            await answer_once(store, "k", int(NOW) + 60, answer(b"first"))
        assert err.value.code == "delivery_pending"
        assert (await store.claim("k", int(NOW) + 60)).state == "pending"  # the retry's claim stands

    asyncio.run(go())


def test_memory_store_purges_released_records_and_answers_ping() -> None:
    clock = FixedClock(NOW)
    store = MemoryNonceStore(clock)

    async def go() -> bool:
        claim = await store.claim("k", int(NOW) + 10)
        await store.release("k", claim.owner)
        clock.advance(11)
        await store.claim("other", int(NOW) + 100)  # purges the released key's expiry entry
        return await store.ping()

    assert asyncio.run(go()) is True and len(store) == 1
