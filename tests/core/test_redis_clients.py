"""gateway/core/redis_clients.py: URL forms, validation, and clients against a real Redis.

The failover behaviour against real sentinels is in tests/e2e/test_sentinel_failover.py, against
a real cluster in tests/e2e/test_cluster_failover.py; every Redis user on a real cluster in
tests/core/test_redis_cluster.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gateway.core.config import parse_config
from gateway.core.errors import ConfigError
from gateway.core.redis_clients import (
    ClusterTarget,
    SentinelTarget,
    async_client,
    describe,
    parse_cluster_url,
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
    ("s1:6379", "redis+cluster://"),
    ("redis+cluster://", "cluster node '' must be host:port"),
    ("redis+cluster://n1", "cluster node 'n1' must be host:port"),
    ("redis+cluster://n1:7000,n2", "cluster node 'n2' must be host:port"),
    ("redis+cluster://n1:70000", "host:port"),
    ("redis+cluster://n1:7000/0", "database 0 only"),
    ("redis+cluster://n1:7000?ssl=true", "no query"),
])
def test_bad_urls_explained(url: str, words: str) -> None:
    problem = url_problem(url)
    assert problem is not None and words in problem


def test_problem_never_repeats_the_password() -> None:
    for url in ("redis+sentinel://u:Sup3rSecretPw@s1/m", "redis+cluster://u:Sup3rSecretPw@n1",
                "redis+cluster://u:Sup3rSecretPw@n1:7000/1"):
        problem = url_problem(url)
        assert problem is not None and "Sup3rSecretPw" not in problem


def test_cluster_url_parsed() -> None:
    assert parse_cluster_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002") == ClusterTarget(
        (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002)))
    t = parse_cluster_url("redis+cluster://app:p%40ss@n1:7000")
    assert (t.username, t.password, t.nodes) == ("app", "p@ss", (("n1", 7000),))
    assert parse_cluster_url("redis+cluster://:pw@n1:7000").username is None
    assert url_problem("redis+cluster://n1:7000,n2:7001") is None
    assert url_problem("redis+cluster://n1:7000/") is None  # a trailing slash names no database


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


def test_config_accepts_cluster_and_names_the_key_when_bad(tmp_path: Path) -> None:
    url = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
    cfg = parse_config({"replay": {"redis_url": url}}, base_dir=tmp_path, env={})
    assert cfg.replay.redis_url == url
    with pytest.raises(ConfigError) as exc:
        parse_config({"replay": {"redis_url": "redis+cluster://u:Pw12345@127.0.0.1:7000/3"}}, base_dir=tmp_path,
                     env={})
    assert exc.value.key == "replay.redis_url" and "database 0 only" in exc.value.message
    assert "Pw12345" not in exc.value.message


def test_describe_hides_credentials() -> None:
    assert describe("redis://:pw@h:6379/0") == "redis"
    assert describe("redis+sentinel://u:pw@a:1,b:2/svc/0") == "redis sentinel (service svc, 2 sentinels)"
    assert describe("redis+cluster://u:pw@a:1,b:2,c:3") == "redis cluster (3 nodes named)"


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
