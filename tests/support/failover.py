"""The stream of signed callbacks both Redis failover tests run while a primary is killed
(tests/e2e/test_sentinel_failover.py, tests/e2e/test_cluster_failover.py), and what they
check afterwards. The stream retries a delivery that got a 503, as the platform does.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from gateway.agent.idempotency import IdempotencyStore
from gateway.core.redis_clients import async_client
from gateway.volcengine.keyuse import read_key_usage
from gateway.volcengine.signing import sign_headers
from tests.support.configs import acme_toml
from tests.support.harness import free_port, serve
from tests.support.redis_procs import wait_until

SECRET = "failover-secret-Hq2Vn81Kz"
ADMIN = "admin-token-failover-0123456789"
BODY = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "密钥轮换", "Limit": 2})
FAST = 2.5  # seconds: the Redis timeout is 1 s; a 503 must come well before any client timeout


@dataclass
class Delivery:
    nonce: str
    ts: int
    created: float
    answers: list[tuple[int, int, float]] = field(default_factory=list)  # (status, Ret, seconds)

    def headers(self) -> dict[str, str]:
        h = sign_headers(SECRET, BODY, self.ts, self.nonce)
        h["X-Request-Id"] = self.nonce
        return h

    @property
    def answered(self) -> bool:
        return any(s == 200 for s, _, _ in self.answers)


def failover_through_kbgate(tmp: Path, indexes: Path, url: str, kill: Callable[[], None],
                            before: Callable[[], object] = lambda: None) -> None:
    """A real `kbgate serve` (two workers) on `replay.redis_url = url` answers a stream of
    callbacks while `kill()` kills a Redis primary; then every check below: no 500, no hang,
    each delivery answered once (a re-sent one is 409 40901), answers again after the
    failover from the same processes, and the other Redis users reach the new primary.
    before(): called once kbgate is ready, before the stream (waits for Redis to be whole)."""
    (tmp / "secret").write_text(SECRET)
    port = free_port()
    cfg = tmp / "gateway.toml"
    cfg.write_text(acme_toml(indexes, port=port, redis_url=url, prefix="kbgate", workers=2,
                             secrets=[("k1", "secret")], admin_token=ADMIN), "utf-8")
    with serve(cfg, port=port, workers=2) as gw:
        assert gw.proc is not None
        pid = gw.proc.pid
        before()
        deliveries, t_kill = stream_through_failover(gw.base, kill)
        assert gw.proc.poll() is None and gw.proc.pid == pid  # no restart
        check_answers(deliveries, t_kill)
        with httpx.Client(timeout=10) as c:  # no delivery is answered twice
            for d in deliveries:
                r = c.post(gw.base + "/volcengine/acme", content=BODY, headers=d.headers())
                assert (r.status_code, orjson.loads(r.content)["Ret"]) == (409, 40901), d.nonce
        check_other_redis_users(gw.base, url, deliveries, t_kill)


def stream_through_failover(base: str, kill: Callable[[], None]) -> tuple[list[Delivery], float]:
    """Two client threads send new deliveries (and retry 503s, as the platform does) while
    `kill()` kills a primary; returns every delivery and the kill time (unix s)."""
    deliveries: list[Delivery] = []
    retry: list[Delivery] = []
    lock = threading.Lock()
    counter = itertools.count()
    creating = threading.Event()
    creating.set()
    stop = threading.Event()
    errors: list[str] = []

    def worker() -> None:
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                with lock:
                    d = retry.pop(0) if retry else None
                if d is None:
                    if not creating.is_set():
                        time.sleep(0.05)
                        continue
                    d = Delivery(f"Failover{next(counter):08d}", int(time.time()), time.time())
                    with lock:
                        deliveries.append(d)
                t0 = time.monotonic()
                try:
                    r = c.post(base + "/volcengine/acme", content=BODY, headers=d.headers())
                except httpx.HTTPError as exc:  # a hang or a dropped connection
                    errors.append(f"{d.nonce}: {type(exc).__name__}")
                    continue
                took = time.monotonic() - t0
                d.answers.append((r.status_code, int(orjson.loads(r.content)["Ret"]), took))
                if r.status_code != 200:
                    time.sleep(0.2)
                    with lock:
                        retry.append(d)
                time.sleep(0.02)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()

    def answered_since(t: float) -> int:
        with lock:
            return sum(1 for d in deliveries if d.created >= t and d.answered)

    try:
        wait_until(lambda: answered_since(0) >= 20, 15, "answers before the kill")
        t_kill = time.time()
        kill()
        wait_until(lambda: answered_since(t_kill + 0.1) >= 20, 30, "answers after the failover")
        creating.clear()
        wait_until(lambda: not retry and all(d.answered for d in deliveries), 15, "every delivery answered")
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert not errors, errors
    return deliveries, t_kill


def check_answers(deliveries: list[Delivery], t_kill: float) -> None:
    answers = [a for d in deliveries for a in d.answers]
    statuses = {s for s, _, _ in answers}
    print(f"{len(deliveries)} deliveries, {len(answers)} answers: "
          f"{sum(s == 503 for s, _, _ in answers)} × 503, {sum(s == 409 for s, _, _ in answers)} × 409 40902, "
          f"slowest {max(t for _, _, t in answers):.3f} s")
    assert statuses <= {200, 503, 409}, statuses  # never a 500
    assert 503 in statuses  # the kill was felt
    slowest = max(took for _, _, took in answers)
    assert slowest < FAST, slowest  # no hang: every 503 is a fast one
    for d in deliveries:
        first_status, first_ret, _ = d.answers[0]
        assert first_status in (200, 503), (d.nonce, d.answers)
        assert sum(s == 200 for s, _, _ in d.answers) == 1, (d.nonce, d.answers)
        assert d.answers[-1][0] == 200, (d.nonce, d.answers)
        for s, ret, _ in d.answers:
            assert (s, ret) in ((200, 0), (503, 50301), (409, 40902)), (d.nonce, d.answers)
    assert any(d.created > t_kill and d.answers[0][0] == 200 for d in deliveries)


def check_other_redis_users(base: str, url: str, deliveries: list[Delivery], t_kill: float) -> None:
    after = {d.nonce for d in deliveries if d.created > t_kill + 0.1}
    # The deliveries record (written by the workers' background writer) reached the new primary.
    seen: set[str] = set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not after & seen:
        r = httpx.get(base + "/admin/deliveries.json?tenant=acme&n=500",
                      headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
        assert r.status_code == 200, r.text
        seen = {rec["request_id"] for rec in r.json()["deliveries"]}
        time.sleep(0.2)
    assert after & seen
    # Key usage, read back by the CLI's synchronous Sentinel client.
    deadline = time.monotonic() + 10
    use = read_key_usage(url, "kbgate", "acme", ["k1"])["k1"]
    while time.monotonic() < deadline and not (use.last or 0) > t_kill:
        time.sleep(0.2)
        use = read_key_usage(url, "kbgate", "acme", ["k1"])["k1"]
    assert use.last is not None and use.last > t_kill and use.count > 0

    async def idempotency() -> str:  # the write tools' store, built as agent_access builds it
        client = async_client(url, 1.0)
        try:
            store = IdempotencyStore(client, "kbgate")
            claim = await store.begin(tool="create_feedback", caller_id="c1", idempotency_key="after-failover-1",
                                      dedupe_key="after-failover-dedupe", payload_hash="0" * 64)
            return claim.outcome
        finally:
            await client.aclose()

    assert asyncio.run(idempotency()) == "new"
