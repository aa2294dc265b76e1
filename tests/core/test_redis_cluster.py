"""Every Redis user of kbgate against a real Redis Cluster (`redis+cluster://`, three
primaries and three replicas started by the test session: tests/support/redis_procs.py).

Rationale: docs/design-notes.md, "tests/core/test_redis_cluster.py".
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from gateway.agent.idempotency import IdempotencyStore, dedupe_redis_key, idempotency_redis_key
from gateway.console.gaps.groups import Question
from gateway.console.gaps.store import RedisGapStore
from gateway.core.config import GapsConfig
from gateway.core.errors import DependencyUnavailable
from gateway.core.redis_clients import async_client, sync_client
from gateway.core.replay import RedisNonceStore, nonce_key
from gateway.ops.deliveries import DeliveryReader, RedisDeliveryLog
from gateway.volcengine.keyuse import RedisKeyUsage, read_key_usage
from tests.support.redis_procs import RedisClusterProcs


def test_replay_claims_on_every_shard(redis_cluster: RedisClusterProcs, key_prefix: str) -> None:
    async def go() -> list[tuple[str, str, str]]:
        store = RedisNonceStore(redis_cluster.url, 1.0)
        out = []
        try:
            for i in range(30):  # 30 keys land on every primary
                key = nonce_key(key_prefix, "acme", str(int(time.time())), f"Nonce{i:06d}")
                first = await store.claim(key, int(time.time()) + 60)
                assert first.state == "claimed" and first.owner is not None
                assert await store.answered(key, first.owner, int(time.time()) + 60) == "recorded"
                again = await store.claim(key, int(time.time()) + 60)
                other = nonce_key(key_prefix, "acme", "1", f"Gone{i:06d}")
                mine = await store.claim(other, int(time.time()) + 60)
                assert mine.owner is not None
                await store.release(other, mine.owner)
                out.append((first.state, again.state, (await store.claim(other, int(time.time()) + 60)).state))
            assert await store.ping()
        finally:
            await store.close()
        return out

    assert set(asyncio.run(go())) == {("claimed", "answered", "claimed")}
    primaries = redis_cluster.primaries()
    held = [n for n in primaries if n.client().keys(f"{key_prefix}:nonce:*")]
    assert len(primaries) == len(held) == 3  # the claims are spread over the shards, not held by one


def test_idempotency_records_share_one_slot(redis_cluster: RedisClusterProcs, key_prefix: str) -> None:
    idem = idempotency_redis_key(key_prefix, "bot", "create_feedback", "k-12345678")
    ded = dedupe_redis_key(key_prefix, "create_feedback", "sha256:" + "0" * 64)
    node = redis_cluster.primaries()[0].client()
    assert node.cluster("KEYSLOT", idem) == node.cluster("KEYSLOT", ded)

    async def go() -> tuple[str, str, str, str]:
        client = async_client(redis_cluster.url, 1.0)
        try:
            store = IdempotencyStore(client, key_prefix)
            first = await store.begin(tool="create_feedback", caller_id="bot", idempotency_key="k-12345678",
                                      dedupe_key="d-1", payload_hash="a" * 64)
            assert await store.finish(first, b'{"id": 1}')
            replay = await store.begin(tool="create_feedback", caller_id="bot", idempotency_key="k-12345678",
                                       dedupe_key="d-1", payload_hash="a" * 64)
            conflict = await store.begin(tool="create_feedback", caller_id="bot", idempotency_key="k-12345678",
                                         dedupe_key="d-2", payload_hash="b" * 64)
            deduped = await store.begin(tool="create_feedback", caller_id="other", idempotency_key=None,
                                        dedupe_key="d-1", payload_hash="c" * 64)
            return first.outcome, replay.outcome, conflict.outcome, deduped.outcome
        finally:
            await client.aclose()

    assert asyncio.run(go()) == ("new", "replay", "conflict", "deduped")


def test_key_usage_written_by_workers_read_by_the_cli(redis_cluster: RedisClusterProcs, key_prefix: str) -> None:
    ids = [f"k{i}" for i in range(12)]

    async def go() -> None:
        usage = RedisKeyUsage(redis_cluster.url, key_prefix, 1.0)
        try:
            for i, k in enumerate(ids):
                for _ in range(i + 1):
                    usage.note("acme", k, 1_800_000_000.0 + i)
            await usage.flush()
            assert (await usage.read("acme", ids))["k3"].count == 4
        finally:
            await usage.close()

    asyncio.run(go())
    read = read_key_usage(redis_cluster.url, key_prefix, "acme", ids)
    assert [read[k].count for k in ids] == list(range(1, 13))
    assert read["k11"].last == 1_800_000_011.0


def test_deliveries_record_across_tenants(redis_cluster: RedisClusterProcs, key_prefix: str) -> None:
    tenants = [f"t{i}" for i in range(8)]

    async def go() -> list[dict[str, object]]:
        log = RedisDeliveryLog(redis_cluster.url, key_prefix, capacity=3, timeout=1.0)
        try:
            for n in range(5):
                for t in tenants:
                    log.submit({"request_id": f"{t}-{n}", "tenant": t, "received_at": 1_800_000_000.0 + n})
            await log.flush()
            return await log.recent(None, 100)
        finally:
            await log.close()

    everything = asyncio.run(go())
    assert Counter(str(r["tenant"]) for r in everything) == {t: 3 for t in tenants}  # each ring trimmed to 3
    reader = DeliveryReader(redis_cluster.url, key_prefix, 1.0)
    try:
        assert [r["request_id"] for r in reader.recent("t5", 10)] == ["t5-4", "t5-3", "t5-2"]
    finally:
        reader.close()


def test_gaps_record_trimmed_across_shards(redis_cluster: RedisClusterProcs, key_prefix: str) -> None:
    cfg = GapsConfig(max_questions=5)
    now = 1_800_000_000.0

    async def go() -> tuple[list[Question], Counter[str], bytes, bytes]:
        store = RedisGapStore(redis_cluster.url, key_prefix, 1.0)
        try:
            key = await store.key()
            questions = [Question(f"q{i}", ("t",), 1, 1, 0, now + i, now + i, Counter({"2027-01-15": 1}))
                         for i in range(9)]
            await store.apply(questions, [(f"q{i}", now + i, f"text {i}") for i in range(9)],
                              {("kb", "2027-01-15"): Counter({"doc-a": 2, "doc-b": 1})}, cfg, now + 10)
            return (await store.questions(cfg, now + 10, with_examples=True),
                    await store.served("kb", ["2027-01-15"]), key, await store.key())
        finally:
            await store.close()

    kept, served, key, again = asyncio.run(go())
    assert sorted(q.key for q in kept) == ["q4", "q5", "q6", "q7", "q8"]  # the least recently seen went
    assert all(q.examples == [f"text {q.key[1:]}"] for q in kept)
    assert served == {"doc-a": 2, "doc-b": 1}
    assert key == again  # made once, shared by every worker
    left = [n.port for n in redis_cluster.primaries() if n.client().keys(f"{key_prefix}:gaps:q:q0")]
    assert not left  # the trimmed question's hash was deleted, wherever its slot lives


def test_unreachable_cluster_fails_fast_as_a_redis_error() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from tests.support.harness import free_port

    url = f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"

    async def go() -> tuple[bool, float]:
        store = RedisNonceStore(url, 1.0)
        t0 = time.perf_counter()
        try:
            return await store.ping(), time.perf_counter() - t0
        finally:
            await store.close()

    answers, took = asyncio.run(go())
    assert not answers and took < 2.0
    with pytest.raises(RedisConnectionError):  # a RedisError, as `kbgate secrets list` expects
        sync_client(url, 1.0)
    with pytest.raises(RedisConnectionError):
        read_key_usage(url, "p", "acme", ["k1"], timeout=0.5)
    reader = DeliveryReader(url, "p", 0.5)  # `kbgate onboard` opens it before Redis is asked
    with pytest.raises(DependencyUnavailable):
        reader.recent("acme", 5)
    reader.close()


def test_replay_claims_waiting_at_once_go_alone_on_a_cluster(redis_cluster: RedisClusterProcs,
                                                             key_prefix: str) -> None:
    # The replay store's batcher (gateway/core/script_batch.py) sends the calls that wait at once
    # in one pipeline on one Redis; redis-py's cluster pipeline refuses EVALSHA, so on a cluster
    # each call goes alone, however many wait at once (a pipeline here failed every claim). And a
    # burst on a fresh client (a worker's first callbacks) is answered whole: before the client
    # read the slot map first (redis_clients._AsyncCluster), a few of 60 claims lost their
    # connection, were re-sent after they had run, and came back "pending".
    async def burst(round_: int) -> tuple[list[str], list[str], int]:
        store = RedisNonceStore(redis_cluster.url, 2.0)  # a fresh client, as a new worker has
        try:
            now = int(time.time())
            keys = [nonce_key(key_prefix, "acme", str(now), f"Batch{round_}-{i:06d}") for i in range(60)]
            claims = await asyncio.gather(*(store.claim(k, now + 60) for k in keys))
            race = await asyncio.gather(*(store.claim(keys[0], now + 60) for _ in range(10)))
            return [c.state for c in claims], [c.state for c in race], store._scripts.round_trips
        finally:
            await store.close()

    for round_ in range(4):
        states, race, round_trips = asyncio.run(burst(round_))
        assert Counter(states) == {"claimed": 60}, round_
        assert set(race) == {"pending"}  # every copy of a claimed delivery waits for its owner
        assert round_trips == 60 + 10
    held = [n for n in redis_cluster.primaries() if n.client().keys(f"{key_prefix}:nonce:*Batch*")]
    assert len(held) == 3
