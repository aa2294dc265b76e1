"""gateway/core/script_batch.py: the replay store's script calls of callbacks waiting at once share
a round trip, and each still gets its own answer (real Redis)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.clock import FixedClock
from gateway.core.redis_clients import async_client
from gateway.core.replay import RedisNonceStore
from gateway.core.script_batch import ScriptBatcher

pytestmark = pytest.mark.anyio
NOW = 1_800_000_000.0
EXPIRE = int(NOW) + 3601


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_many_claims_at_once_share_round_trips_and_each_gets_its_own_state(
        redis_url: str, key_prefix: str) -> None:
    store = RedisNonceStore(redis_url, 2.0, FixedClock(NOW))
    try:
        keys = [f"{key_prefix}:k{i}" for i in range(40)]
        claims = await asyncio.gather(*(store.claim(k, EXPIRE) for k in keys))
        assert all(c.state == "claimed" for c in claims) and len({c.owner for c in claims}) == 40
        assert store._scripts.round_trips < 10  # one alone, then the 39 that waited, in a few pipelines
        # Racing copies of one delivery inside the same round trip: exactly one claims.
        race = await asyncio.gather(*(store.claim(f"{key_prefix}:race", EXPIRE) for _ in range(20)))
        assert sorted(c.state for c in race).count("claimed") == 1
        assert {c.state for c in race} == {"claimed", "pending"}
        # Each owner's `answered` is its own step: the owners record, a stranger does not.
        owners = [(k, c.owner or "") for k, c in zip(keys, claims, strict=True)]
        states = await asyncio.gather(*(store.answered(k, owner, EXPIRE) for k, owner in owners),
                                      store.answered(keys[0], "someone-else", EXPIRE))
        assert states[:-1] == ["recorded"] * 40 and states[-1] == "answered"
        again = await asyncio.gather(*(store.claim(k, EXPIRE) for k in keys))
        assert {c.state for c in again} == {"answered"}
    finally:
        await store.close()


async def test_a_script_redis_does_not_hold_yet_is_loaded_inside_a_batch(redis_url: str, key_prefix: str) -> None:
    """As after a Redis restart (its script cache empty): a batch's NOSCRIPT replies are run again
    alone (loading the script), each caller getting its own script's reply."""
    client = async_client(redis_url, 2.0)
    batcher = ScriptBatcher(client)
    first = client.register_script(f"return 'first {key_prefix}'")  # texts never sent before
    echo = client.register_script(f"return ARGV[1] .. ' {key_prefix}'")
    try:
        replies = await asyncio.gather(batcher.call(first, "k", []),
                                       *(batcher.call(echo, f"k{i}", [f"v{i}"]) for i in range(5)))
        assert [r.decode() for r in replies] == [f"first {key_prefix}", *(f"v{i} {key_prefix}" for i in range(5))]
        assert batcher.round_trips == 3  # the first two alone (two on the wire), the four that waited together
    finally:
        await client.aclose()


async def test_a_caller_that_gives_up_does_not_disturb_the_others(redis_url: str, key_prefix: str) -> None:
    store = RedisNonceStore(redis_url, 2.0, FixedClock(NOW))
    try:
        async def impatient() -> None:
            async with asyncio.timeout(0):  # gives up before its call leaves
                await store.claim(f"{key_prefix}:gone", EXPIRE)

        results = await asyncio.gather(store.claim(f"{key_prefix}:a", EXPIRE), impatient(),
                                       store.claim(f"{key_prefix}:b", EXPIRE), return_exceptions=True)
        assert results[0].state == "claimed" and results[2].state == "claimed"  # type: ignore[union-attr]
        assert isinstance(results[1], TimeoutError)
        assert (await store.claim(f"{key_prefix}:c", EXPIRE)).state == "claimed"  # the wire is free again
    finally:
        await store.close()
