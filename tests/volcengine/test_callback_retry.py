"""gateway/volcengine/handler.py with gateway/core/replay.py: a delivery we failed to answer is answered when
the platform retries it; one we answered never is.

Real parts: a real Redis (a throwaway `redis-server` where it is frozen with SIGSTOP), a real
Tantivy index, the ASGI app in-process, and a real `kbgate serve` for the client that hangs up.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import Config
from gateway.core.replay import PENDING_SECONDS, RedisNonceStore
from gateway.volcengine.signing import sign_headers
from indexes.store import IndexStore
from tests.support.callbacks import ret
from tests.support.configs import ENV, SECRET_ACME, acme_toml, config, parse, tenant
from tests.support.documents import KB_DOCS
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT
from tests.support.redis_procs import RedisProc

SECRET = SECRET_ACME
BODY = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "密钥轮换", "Limit": 3})
LATER = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "later", "Query": "密钥轮换", "Limit": 3})


def retry_config(root: Path, indexes: Path, redis_url: str, prefix: str, timeout: float = 1.0) -> Config:
    """Tenant acme: tech/software → kb, tech/later → an index 'later' that does not exist yet."""
    acme = tenant("acme", keys=[("k1", "env:ACME_SECRET")],
                  routes=[("tech", "software", "kb"), ("tech", "later", "later")])
    return parse(config(root, tenants=[acme], indexes=indexes, redis_url=redis_url, key_prefix=prefix,
                        replay={"timeout_seconds": timeout}), root, ENV)


Factory = Callable[..., Any]


@pytest.fixture(name="gateway")
def _gateway(tmp_path: Path, private_index: Path, start_app: Factory) -> Factory:
    """gateway(redis_url, prefix, timeout=, pending_seconds=) → a client of the app on the real
    clock, over a private copy of the test index (a test adds the index 'later' to it)."""

    async def factory(redis_url: str, prefix: str, *, timeout: float = 1.0,
                      pending_seconds: float = 1.0) -> httpx.AsyncClient:
        cfg = retry_config(tmp_path, private_index, redis_url, prefix, timeout)
        c, _, _ = await start_app(cfg, clock=SYSTEM_CLOCK,
                                  nonces=RedisNonceStore(redis_url, timeout, pending_seconds=pending_seconds))
        return c  # type: ignore[no-any-return]

    return factory


async def deliver_until_answered(c: httpx.AsyncClient, body: bytes, headers: dict[str, str],
                                 within: float) -> list[int]:
    """Send the same bytes again and again (as a platform retries) until a 200; the Rets seen."""
    seen: list[int] = []
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        r = await c.post("/volcengine/acme", content=body, headers=headers)
        seen.append(ret(r))
        if r.status_code == 200:
            break
        await asyncio.sleep(0.1)
    return seen


@pytest.mark.anyio
async def test_redis_frozen_past_the_timeout_then_the_retry_is_answered(gateway: Factory, tmp_path: Path) -> None:
    # 503 50301 while Redis is frozen; once it resumes, the
    # same bytes are answered (never 409 40901, since nothing was answered).
    server = RedisProc(tmp_path).start()
    try:
        c = await gateway(server.url, "kbgate", timeout=0.3, pending_seconds=1.0)
        warm = await c.post("/volcengine/acme", content=BODY, headers=sign_headers(SECRET, BODY, int(time.time())))
        assert warm.status_code == 200
        headers = sign_headers(SECRET, BODY, int(time.time()), "FrozenRedis01")
        server.freeze()
        try:
            t0 = time.monotonic()
            r = await c.post("/volcengine/acme", content=BODY, headers=headers)
            took = time.monotonic() - t0
        finally:
            server.thaw()
        assert (r.status_code, ret(r)) == (503, 50301)
        assert took < 1.5
        seen = await deliver_until_answered(c, BODY, headers, within=3.0)
        assert seen[0] == 40902, seen  # the timed-out claim did land late (the scenario)
        assert seen[-1] == 0, seen  # and the retry is answered once its deadline passed
        assert set(seen[:-1]) <= {40902}, seen  # "being answered" until then, never 40901
        again = await c.post("/volcengine/acme", content=BODY, headers=headers)
        assert (again.status_code, ret(again)) == (409, 40901)
    finally:
        server.stop()


def stall_paragraph(doc: str) -> str:
    text = (ROOT / "docs" / doc).read_text("utf-8")
    inside = text.split("<!-- retry-after-stall:start -->")[1].split("<!-- retry-after-stall:end -->")[0]
    return " ".join(inside.split())


def test_the_docs_say_one_thing_about_a_retry_after_a_redis_stall(tmp_path: Path) -> None:
    # what the test above sees: 40902 until the late claim's deadline, then the answer
    console, on_call = stall_paragraph("volcengine-console.md"), stall_paragraph("on-call.md")
    assert console == on_call
    default = parse(config(tmp_path, tenants=[]), tmp_path).replay.timeout_seconds
    deadline = f"{PENDING_SECONDS:g} s + `replay.timeout_seconds` ({PENDING_SECONDS + default:g} s by default)"
    assert "(503 `50301`)" in console and "409 `40902` until" in console and deadline in console


@pytest.mark.anyio
async def test_missing_index_then_restored_the_retry_is_answered(gateway: Factory, tmp_path: Path,
                                                                 redis_url: str, key_prefix: str) -> None:
    # a route to an index that does not exist yet.
    c = await gateway(redis_url, key_prefix)
    headers = sign_headers(SECRET, LATER, int(time.time()), "MissingIndex1")
    r = await c.post("/volcengine/acme", content=LATER, headers=headers)
    assert (r.status_code, ret(r)) == (503, 50302)
    IndexStore(tmp_path / "indexes").create_or_open_for_write("later").ingest(KB_DOCS, progress=False)
    r = await c.post("/volcengine/acme", content=LATER, headers=headers)
    assert r.status_code == 200 and orjson.loads(r.content)["Result"][0]["Id"] == "kb-1"
    r = await c.post("/volcengine/acme", content=LATER, headers=headers)
    assert (r.status_code, ret(r)) == (409, 40901)


@pytest.mark.anyio
async def test_a_4xx_is_not_remembered_as_answered(gateway: Factory, redis_url: str, key_prefix: str) -> None:
    c = await gateway(redis_url, key_prefix)
    body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "  "})
    headers = sign_headers(SECRET, body, int(time.time()), "EmptyQuery01")
    for _ in range(2):  # the same bytes get the same answer, not "already delivered"
        r = await c.post("/volcengine/acme", content=body, headers=headers)
        assert (r.status_code, ret(r)) == (400, 40008)


@pytest.mark.anyio
async def test_answered_then_the_same_bytes_are_409(gateway: Factory, redis_url: str, key_prefix: str) -> None:
    c = await gateway(redis_url, key_prefix)
    headers = sign_headers(SECRET, BODY, int(time.time()), "AnsweredOnce1")
    assert (await c.post("/volcengine/acme", content=BODY, headers=headers)).status_code == 200
    for _ in range(3):
        r = await c.post("/volcengine/acme", content=BODY, headers=headers)
        assert (r.status_code, ret(r)) == (409, 40901)
        assert "already answered" in orjson.loads(r.content)["Msg"]


@pytest.mark.anyio
async def test_racing_identical_deliveries_get_exactly_one_200(gateway: Factory, redis_url: str,
                                                               key_prefix: str) -> None:
    c = await gateway(redis_url, key_prefix)
    headers = sign_headers(SECRET, BODY, int(time.time()), "RacingDupes1")
    rs = await asyncio.gather(*[c.post("/volcengine/acme", content=BODY, headers=headers) for _ in range(24)])
    rets = [ret(r) for r in rs]
    assert rets.count(0) == 1, rets
    assert set(rets) <= {0, 40901, 40902}, rets
    assert all(r.status_code == 409 for r in rs if ret(r) != 0)


def test_a_caller_that_hangs_up_before_the_answer_can_retry(tmp_path: Path, docs_index: Path) -> None:
    # The platform gives up (its own timeout) while our claim waits on a slow Redis, then
    # retries: the retry must be answered, since the first answer never reached it.
    server = RedisProc(tmp_path).start()
    (tmp_path / "secret").write_text(SECRET)
    port = free_port()
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(docs_index, port=port, redis_url=server.url, prefix="kbgate", workers=1,
                             secrets=[("k1", "secret")]), "utf-8")
    try:
        with serve(cfg, port=port, workers=1) as gw:
            headers = sign_headers(SECRET, BODY, int(time.time()), "HungUp000001")
            request = (b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
                       + f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY)
            server.freeze()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(request)
                    time.sleep(0.3)  # the claim is waiting on the frozen Redis
                s.close()
                time.sleep(0.2)
            finally:
                server.thaw()  # within the 1 s timeout: the claim itself succeeds
            gw.wait_log("callback", 1)
            r = httpx.post(gw.base + "/volcengine/acme", content=BODY, headers=headers, timeout=10)
            assert r.status_code == 200, r.text
            first = [rec for rec in gw.log_records() if rec.get("msg") == "callback"][0]
            assert first["outcome"] == "client_disconnected"
            r = httpx.post(gw.base + "/volcengine/acme", content=BODY, headers=headers, timeout=10)
            assert (r.status_code, ret(r)) == (409, 40901)
    finally:
        server.stop()
