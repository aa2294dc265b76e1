"""The limit on failed console logins (gateway.console.throttle): per user name and per client
address, in memory on the fixed clock, in Redis shared between workers, and through the app's
login form (429 with Retry-After, the credential never checked meanwhile)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.console.throttle import MAX_FAILURES, WINDOW, MemoryThrottle, RedisThrottle, keys
from gateway.core.clock import FixedClock
from tests.support.configs import ADMIN_TOKEN, NOW, config, parse

pytestmark = pytest.mark.anyio


async def test_a_user_name_is_held_after_its_failures_until_the_window_ends() -> None:
    clock = FixedClock(float(NOW))
    t = MemoryThrottle(clock.now)
    ann = keys("ann", "10.0.0.1")
    for _ in range(MAX_FAILURES["user"] - 1):
        await t.failed(ann)
    assert await t.retry_after(ann) is None
    await t.failed(ann)
    assert await t.retry_after(ann) == WINDOW
    assert await t.retry_after(keys("ann", "10.0.0.2")) == WINDOW  # the name is held from any address
    assert await t.retry_after(keys("bob", "10.0.0.1")) is None  # the address is not yet over its limit
    clock.advance(WINDOW - 10)
    assert await t.retry_after(ann) == 10
    clock.advance(10)
    assert await t.retry_after(ann) is None


async def test_an_address_is_held_after_its_failures_whatever_the_names() -> None:
    clock = FixedClock(float(NOW))
    t = MemoryThrottle(clock.now)
    for i in range(MAX_FAILURES["addr"]):
        await t.failed(keys(f"guess{i}", "10.0.0.9"))
    assert await t.retry_after(keys("someone-new", "10.0.0.9")) == WINDOW
    assert await t.retry_after(keys("someone-new", "10.0.0.8")) is None


async def test_memory_counts_stay_bounded() -> None:
    t = MemoryThrottle(FixedClock(float(NOW)).now, max_keys=10)
    for i in range(100):
        await t.failed(keys(f"n{i}", None))
    assert len(t._counts) == 10


async def test_redis_counts_are_shared_by_every_worker(redis_url: str, key_prefix: str) -> None:
    one, two = RedisThrottle(redis_url, key_prefix, 1.0), RedisThrottle(redis_url, key_prefix, 1.0)
    try:
        ann = keys("ann", "10.0.0.1")
        for _ in range(MAX_FAILURES["user"]):
            await one.failed(ann)
        wait = await two.retry_after(keys("ann", "10.0.0.2"))
        assert wait is not None and WINDOW - 2 <= wait <= WINDOW
        assert await two.retry_after(keys("bob", "10.0.0.2")) is None
    finally:
        await one.close()
        await two.close()


async def test_the_login_form_answers_429_after_too_many_failures(tmp_path: Path, start_app: Any,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # 30 admin-token guesses went through in 1.4 s: no limit at all.
    c, _, clock = await start_app(parse(config(tmp_path, admin_token=ADMIN_TOKEN), tmp_path))
    caplog.set_level(logging.DEBUG)
    for i in range(MAX_FAILURES["user"]):
        r = await c.post("/admin/login", data={"token": f"wrong-guess-number-{i:04d}"})
        assert r.status_code == 401
    r = await c.post("/admin/login", data={"token": ADMIN_TOKEN})  # even the right token waits
    assert r.status_code == 429 and r.headers["retry-after"] == str(WINDOW) and "set-cookie" not in r.headers
    assert "Too many failed logins" in r.text
    assert "wrong-guess-number" not in caplog.text and ADMIN_TOKEN not in caplog.text
    clock.advance(WINDOW)
    r = await c.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert r.status_code == 303 and "kbgate_admin=" in r.headers["set-cookie"]
