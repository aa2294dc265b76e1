"""Every Redis client kbgate uses, built in one place from `replay.redis_url`.

The replay store, the idempotency records of the write tools, key usage, the deliveries
record and the CLI's reads all connect through `async_client` / `sync_client`, so they
share one URL syntax, one set of timeouts and one retry rule:

- `timeout` seconds to connect and for each command (a hung Redis costs at most that);
- one immediate retry on a broken connection (after a Redis restart or a failover every
  pooled connection is dead and the first command on each would otherwise fail); a
  timeout is never retried, so a caller's own deadline stays `timeout`.

URL forms (`url_problem` validates them; the config names `replay.redis_url` on failure):

- `redis://[[user]:password@]host[:port][/db]`, `rediss://…` (TLS), `unix:///path?db=N`:
  one Redis, redis-py's own URL syntax.
- `redis+sentinel://[[user]:password@]host:port[,host:port…]/service_name[/db]`: Redis
  Sentinel (redis-py `redis.sentinel.Sentinel` / `redis.asyncio.sentinel.Sentinel`). Each
  new connection asks the sentinels (in turn, `timeout` each) for the current primary of
  `service_name`; a connection to a primary that died or was demoted fails, is dropped,
  and the next one goes to the new primary — no restart. The credentials authenticate to
  the primary; the sentinels are asked without credentials. `db` defaults to 0.

Replication to a replica is asynchronous (Redis' own rule): a write acknowledged by a
primary in the instant before it dies can be lost by the failover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "redis+sentinel://"
PLAIN_SCHEMES = ("redis://", "rediss://", "unix://")
HEALTH_CHECK_INTERVAL = 30  # seconds of idleness after which a pooled connection is PINGed first


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """A parsed `redis+sentinel://` URL.

    sentinels: ((host, port), …) in the order given. service: the monitored master's name
    (`sentinel monitor <service> …`). db: database number. username/password: for the
    primary (None when absent).
    """

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_sentinel_url(url: str) -> SentinelTarget:
    """Parse `redis+sentinel://[[user]:password@]host:port[,host:port…]/service_name[/db]`.

    IPv6 hosts are written in brackets (`[::1]:26379`). Raises ValueError with a message
    that never repeats the password.
    """
    if not url.startswith(SENTINEL_SCHEME):
        raise ValueError(f"must start with {SENTINEL_SCHEME}")
    rest = url[len(SENTINEL_SCHEME):]
    netloc, slash, path = rest.partition("/")
    if "?" in path or "#" in path:
        raise ValueError("takes no query or fragment")
    username = password = None
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    sentinels: list[tuple[str, int]] = []
    for part in netloc.split(","):
        host, port = _host_port(part)
        sentinels.append((host, port))
    parts = path.split("/") if slash else []
    if not parts or not parts[0]:
        raise ValueError("needs the service name: redis+sentinel://host:port[,host:port]/service_name[/db]")
    service = unquote(parts[0])
    db = 0
    if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError("ends in /service_name or /service_name/db with db a number")
    if len(parts) == 2:
        db = int(parts[1])
    return SentinelTarget(tuple(sentinels), service, db, username, password)


def _host_port(part: str) -> tuple[str, int]:
    if part.startswith("["):
        host, sep, port = part[1:].partition("]:")
    else:
        host, sep, port = part.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"sentinel {part!r} must be host:port")
    return host, int(port)


def url_problem(url: object) -> str | None:
    """Why `url` is not a Redis URL kbgate accepts, or None. Never echoes a password."""
    if not isinstance(url, str):
        return "must be a string"
    if url.startswith(SENTINEL_SCHEME):
        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            return str(exc)
        return None
    if not url.startswith(PLAIN_SCHEMES):
        return "must be a redis://, rediss://, unix:// or redis+sentinel:// URL"
    return None


def describe(url: str) -> str:
    """A one-line, password-free description for logs and `check-config`:
    'redis' or 'redis sentinel (service S, N sentinels)'."""
    if url.startswith(SENTINEL_SCHEME):
        t = parse_sentinel_url(url)
        return f"redis sentinel (service {t.service}, {len(t.sentinels)} sentinels)"
    return "redis"


def _common(timeout: float) -> dict[str, Any]:
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry_on_error": [RedisConnectionError],  # and never TimeoutError
        "health_check_interval": HEALTH_CHECK_INTERVAL,
    }


def _sentinel_kwargs(timeout: float, retry: Any) -> dict[str, Any]:
    # A sentinel that does not answer is skipped for the next one, never retried: redis-py's
    # default (three retries with backoff up to 10 s) would hold a callback for seconds.
    return {"socket_timeout": timeout, "socket_connect_timeout": timeout, "retry": retry}


class _SentinelRedis(aioredis.Redis):
    """A primary's client that also closes the sentinel connections it discovered it with."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pool = self.connection_pool
        await super().aclose(close_connection_pool)
        manager = getattr(pool, "sentinel_manager", None)
        if manager is not None:
            await manager.aclose()


def async_client(url: str, timeout: float) -> aioredis.Redis:
    """An asyncio client for `url` (see the module docstring for forms, timeouts, retry).

    timeout: seconds, for connecting (including asking the sentinels) and per command.
    Raises ValueError for a malformed `redis+sentinel://` URL. Close with `await c.aclose()`.
    """
    kwargs = _common(timeout)
    if url.startswith(SENTINEL_SCHEME):
        t = parse_sentinel_url(url)
        sentinel = AsyncSentinel(  # type: ignore[no-untyped-call]  # untyped in redis-py
            list(t.sentinels),
            sentinel_kwargs=_sentinel_kwargs(timeout, AsyncRetry(NoBackoff(), 0)),
        )
        client: aioredis.Redis = sentinel.master_for(
            t.service, redis_class=_SentinelRedis, db=t.db, username=t.username, password=t.password,
            retry=AsyncRetry(NoBackoff(), 1), **kwargs)
        return client
    return aioredis.Redis.from_url(url, retry=AsyncRetry(NoBackoff(), 1), **kwargs)


class _SyncSentinelRedis(redis.Redis):
    """The synchronous twin of `_SentinelRedis`."""

    def close(self) -> None:
        pool = self.connection_pool
        super().close()
        manager = getattr(pool, "sentinel_manager", None)
        for s in getattr(manager, "sentinels", ()):
            s.close()


def sync_client(url: str, timeout: float) -> redis.Redis:
    """A blocking client for `url`, for the CLI (`kbgate secrets list`, `onboard`).

    Same forms, timeouts and retry as `async_client`. Close with `c.close()`.
    """
    kwargs = _common(timeout)
    if url.startswith(SENTINEL_SCHEME):
        t = parse_sentinel_url(url)
        sentinel = Sentinel(  # type: ignore[no-untyped-call]  # untyped in redis-py
            list(t.sentinels),
            sentinel_kwargs=_sentinel_kwargs(timeout, Retry(NoBackoff(), 0)),
        )
        client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]  # untyped in redis-py
            t.service, redis_class=_SyncSentinelRedis, db=t.db, username=t.username, password=t.password,
            retry=Retry(NoBackoff(), 1), **kwargs)
        return client
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 1), **kwargs)
