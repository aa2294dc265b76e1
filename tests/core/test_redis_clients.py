"""gateway/core/redis_clients.py: URL forms, validation, and clients against a real Redis.

The failover behaviour against real sentinels is in tests/test_sentinel_failover.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gateway.core.config import parse_config
from gateway.core.errors import ConfigError
from gateway.core.redis_clients import (
    SentinelTarget,
    async_client,
    describe,
    parse_sentinel_url,
    sync_client,
    url_problem,
)
from tests.support.harness import free_port


def test_sentinel_url_parsed() -> None:
    t = parse_sentinel_url("redis+sentinel://10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/kbgate/3")
    assert t == SentinelTarget((("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381)), "kbgate", 3)


def test_sentinel_url_credentials_and_default_db() -> None:
    t = parse_sentinel_url("redis+sentinel://app:p%40ss@s1:26379/mymaster")
    assert (t.username, t.password, t.db, t.service) == ("app", "p@ss", 0, "mymaster")
    assert parse_sentinel_url("redis+sentinel://:pw@s1:26379/m/1").username is None


@pytest.mark.parametrize(("url", "words"), [
    ("redis+sentinel://s1:26379", "service name"),
    ("redis+sentinel://s1:26379/", "service name"),
    ("redis+sentinel://s1/m", "host:port"),
    ("redis+sentinel://s1:0/m", "host:port"),
    ("redis+sentinel://s1:26379,/m", "host:port"),
    ("redis+sentinel://s1:26379/m/x", "db a number"),
    ("redis+sentinel://s1:26379/m/1/2", "db a number"),
    ("redis+sentinel://s1:26379/m?db=1", "no query"),
    ("http://s1:26379/m", "redis+sentinel://"),
    ("s1:6379", "redis+sentinel://"),
])
def test_bad_urls_explained(url: str, words: str) -> None:
    problem = url_problem(url)
    assert problem is not None and words in problem


def test_problem_never_repeats_the_password() -> None:
    problem = url_problem("redis+sentinel://u:Sup3rSecretPw@s1/m")
    assert problem is not None and "Sup3rSecretPw" not in problem


def test_plain_urls_accepted() -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://h:6380/1", "unix:///run/redis.sock?db=2"):
        assert url_problem(url) is None


def test_config_accepts_sentinel_and_names_the_key_when_bad(tmp_path: Path) -> None:
    url = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/kbgate/0"
    cfg = parse_config({"replay": {"redis_url": url}}, base_dir=tmp_path, env={})
    assert cfg.replay.redis_url == url
    with pytest.raises(ConfigError) as exc:
        parse_config({"replay": {"redis_url": "redis+sentinel://127.0.0.1:26379"}}, base_dir=tmp_path, env={})
    assert exc.value.key == "replay.redis_url" and "service name" in exc.value.message


def test_describe_hides_credentials() -> None:
    assert describe("redis://:pw@h:6379/0") == "redis"
    assert describe("redis+sentinel://u:pw@a:1,b:2/svc/0") == "redis sentinel (service svc, 2 sentinels)"


def test_clients_reach_a_real_redis(redis_url: str, key_prefix: str) -> None:
    sync = sync_client(redis_url, 1.0)
    try:
        sync.set(f"{key_prefix}:x", b"1", ex=10)
    finally:
        sync.close()

    async def go() -> bytes | None:
        c = async_client(redis_url, 1.0)
        try:
            value: bytes | None = await c.get(f"{key_prefix}:x")
            return value
        finally:
            await c.aclose()

    assert asyncio.run(go()) == b"1"


def test_sentinel_client_with_no_sentinel_fails_fast() -> None:
    # Nothing listens on these ports: discovery fails with a ConnectionError at once.
    from redis.exceptions import ConnectionError as RedisConnectionError

    url = f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/kbgate/0"

    async def go() -> float:
        c = async_client(url, 1.0)
        t0 = time.perf_counter()
        try:
            with pytest.raises(RedisConnectionError):
                await c.ping()
        finally:
            await c.aclose()
        return time.perf_counter() - t0

    assert asyncio.run(go()) < 2.0
    s = sync_client(url, 1.0)
    with pytest.raises(RedisConnectionError):
        s.ping()
    s.close()
