"""gateway/agent/idempotency.py against a real Redis: replay, conflict, dedupe, races, retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from gateway.agent.idempotency import (
    IdempotencyStore,
    canonical_dedupe_key,
    canonical_hash,
    dedupe_redis_key,
    idempotency_redis_key,
)
from gateway.core.errors import ToolError


@pytest.fixture(name="store")
async def _store(redis_url: str, key_prefix: str) -> AsyncIterator[IdempotencyStore]:
    client = aioredis.Redis.from_url(redis_url)
    yield IdempotencyStore(client, key_prefix, idempotency_ttl=60, dedupe_ttl=120, pending_ttl=5)
    await client.aclose()


def args(**over: object) -> dict[str, object]:
    a: dict[str, object] = {"tool": "create_feedback", "caller_id": "bot-a", "idempotency_key": "idem-0001",
                            "dedupe_key": "sha256:feedback-1", "payload_hash": "h1"}
    a.update(over)
    return a


def test_keys_include_caller_only_for_idempotency() -> None:
    a = idempotency_redis_key("p", "bot-a", "create_feedback", "k-12345678")
    b = idempotency_redis_key("p", "bot-b", "create_feedback", "k-12345678")
    assert a != b and a.startswith("p:{access}:idem:")
    assert dedupe_redis_key("p", "create_feedback", "x") == dedupe_redis_key("p", "create_feedback", "x")
    assert "bot" not in dedupe_redis_key("p", "create_feedback", "x")


def test_canonical_dedupe_key_normalizes_and_ignores_key_order() -> None:
    k1 = canonical_dedupe_key("create_feedback", {"kind": "no_answer", "message": "找不到  密钥 轮换"})
    k2 = canonical_dedupe_key("create_feedback", {"message": " 找不到 密钥 轮换 ", "kind": "no_answer"})
    k3 = canonical_dedupe_key("create_improvement_task", {"kind": "no_answer", "message": "找不到 密钥 轮换"})
    assert k1 == k2 != k3
    assert k1.startswith("sha256:") and len(k1) == 71
    assert canonical_hash({"b": 1, "a": 2}) == canonical_hash({"a": 2, "b": 1})


@pytest.mark.anyio
async def test_new_then_replay_same_result(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    assert c.outcome == "new"
    assert await store.finish(c, b'{"recordId":"fb_1"}')
    again = await store.begin(**args())  # type: ignore[arg-type]
    assert again.outcome == "replay" and again.result == b'{"recordId":"fb_1"}'
    assert again.replayed_outcome == "created" and again.count == 1


@pytest.mark.anyio
async def test_same_key_different_payload_conflicts(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    await store.finish(c, b"{}")
    assert (await store.begin(**args(payload_hash="h2"))).outcome == "conflict"  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_same_key_other_caller_is_independent(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    await store.finish(c, b"{}")
    other = await store.begin(**args(caller_id="bot-b", payload_hash="h2", dedupe_key="sha256:other"))  # type: ignore[arg-type]
    assert other.outcome == "new"


@pytest.mark.anyio
async def test_duplicate_dedupe_key_returns_existing_and_counts(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    await store.finish(c, b'{"recordId":"fb_1"}')
    d1 = await store.begin(**args(caller_id="bot-b", idempotency_key="idem-0002"))  # type: ignore[arg-type]
    d2 = await store.begin(**args(caller_id="bot-c", idempotency_key=None))  # type: ignore[arg-type]
    assert (d1.outcome, d1.count, d1.result) == ("deduped", 2, b'{"recordId":"fb_1"}')
    assert (d2.outcome, d2.count) == ("deduped", 3)
    # bot-b retrying its own key replays its own answer (count 2), it does not bump again
    r = await store.begin(**args(caller_id="bot-b", idempotency_key="idem-0002"))  # type: ignore[arg-type]
    assert (r.outcome, r.count, r.replayed_outcome) == ("replay", 2, "deduped")


@pytest.mark.anyio
async def test_abandon_lets_a_retry_own_the_write(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    assert (await store.begin(**args(idempotency_key="idem-other"))).outcome == "pending"  # type: ignore[arg-type]
    await store.abandon(c)
    assert (await store.begin(**args())).outcome == "new"  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_finish_by_a_stale_owner_is_refused(store: IdempotencyStore) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    await store.abandon(c)
    c2 = await store.begin(**args())  # type: ignore[arg-type]
    assert not await store.finish(c, b"stale")
    assert await store.finish(c2, b"fresh")
    assert (await store.begin(**args())).result == b"fresh"  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_retention_ttls_are_set(store: IdempotencyStore, redis_url: str) -> None:
    c = await store.begin(**args())  # type: ignore[arg-type]
    r = aioredis.Redis.from_url(redis_url)
    assert 0 < await r.pttl(c.dedupe_key) <= 5000  # pending lifetime
    await store.finish(c, b"{}")
    assert 5000 < await r.pttl(c.dedupe_key) <= 120_000
    assert c.idem_key is not None and 5000 < await r.pttl(c.idem_key) <= 60_000
    await r.aclose()


@pytest.mark.anyio
async def test_parallel_begins_make_exactly_one_owner(store: IdempotencyStore) -> None:
    claims = await asyncio.gather(*[
        store.begin(**args(caller_id=f"bot-{i}", idempotency_key=f"idem-{i:04d}"))  # type: ignore[arg-type]
        for i in range(40)])
    assert [c.outcome for c in claims].count("new") == 1
    assert {c.outcome for c in claims} == {"new", "pending"}


@pytest.mark.anyio
async def test_settle_waits_for_the_owner(store: IdempotencyStore) -> None:
    owner = await store.begin(**args())  # type: ignore[arg-type]

    async def finish_later() -> None:
        await asyncio.sleep(0.2)
        await store.finish(owner, b'{"recordId":"fb_1"}')

    task = asyncio.create_task(finish_later())
    waited = await store.settle(**args(caller_id="bot-b", idempotency_key="idem-0009"))  # type: ignore[arg-type]
    await task
    assert (waited.outcome, waited.count) == ("deduped", 2)


@pytest.mark.anyio
async def test_settle_gives_up_retryably(store: IdempotencyStore) -> None:
    await store.begin(**args())  # type: ignore[arg-type]
    with pytest.raises(ToolError) as e:
        await store.settle(**args(idempotency_key="idem-0009"), wait=0.1)  # type: ignore[arg-type]
    assert e.value.code == "access.tool_failed" and e.value.retryable


@pytest.mark.anyio
async def test_redis_down_fails_closed() -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    store = IdempotencyStore(client, "p", timeout=0.5)
    with pytest.raises(ToolError) as e:
        await store.begin(**args())  # type: ignore[arg-type]
    assert e.value.code == "access.tool_failed" and e.value.retryable
    await client.aclose()
