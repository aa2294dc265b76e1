"""Every Redis client kbgate uses, built in one place from `replay.redis_url`.

Rationale: docs/design-notes.md, "gateway/core/redis_clients.py".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
import redis.asyncio as aioredis
import redis.asyncio.cluster as aiocluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "redis+sentinel://"
CLUSTER_SCHEME = "redis+cluster://"
PLAIN_SCHEMES = ("redis://", "rediss://", "unix://")

# What `async_client` / `sync_client` return: one Redis (a Sentinel's primary included) or a
# cluster client; both take the commands, scripts and pipelines kbgate sends.
AsyncRedis = aioredis.Redis | aiocluster.RedisCluster
SyncRedis = redis.Redis | redis.cluster.RedisCluster
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
    username, password, sentinels = _hosts(netloc, "sentinel")
    parts = path.split("/") if slash else []
    if not parts or not parts[0]:
        raise ValueError("needs the service name: redis+sentinel://host:port[,host:port]/service_name[/db]")
    service = unquote(parts[0])
    db = 0
    if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError("ends in /service_name or /service_name/db with db a number")
    if len(parts) == 2:
        db = int(parts[1])
    return SentinelTarget(sentinels, service, db, username, password)


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    """A parsed `redis+cluster://` URL. nodes: ((host, port), …) in the order given: where
    the slot map is first asked for. username/password: for every node (None when absent)."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None


def parse_cluster_url(url: str) -> ClusterTarget:
    """Parse `redis+cluster://[[user]:password@]host:port[,host:port…]`.

    IPv6 hosts are written in brackets. Raises ValueError with a message that never repeats
    the password: no node, a node without a port, a path (Cluster has database 0 only), a query.
    """
    if not url.startswith(CLUSTER_SCHEME):
        raise ValueError(f"must start with {CLUSTER_SCHEME}")
    netloc, slash, path = url[len(CLUSTER_SCHEME):].partition("/")
    if "?" in netloc or "#" in netloc or "?" in path or "#" in path:
        raise ValueError("takes no query or fragment")
    if path:
        raise ValueError("takes no /db: a Redis Cluster has database 0 only "
                         "(redis+cluster://host:port[,host:port…])")
    username, password, nodes = _hosts(netloc, "cluster node")
    return ClusterTarget(nodes, username, password)


def _hosts(netloc: str, what: str) -> tuple[str | None, str | None, tuple[tuple[str, int], ...]]:
    """(username, password, ((host, port), …)) of '[[user]:password@]host:port[,host:port…]'."""
    username = password = None
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    return username, password, tuple(_host_port(part, what) for part in netloc.split(","))


def _host_port(part: str, what: str) -> tuple[str, int]:
    if part.startswith("["):
        host, sep, port = part[1:].partition("]:")
    else:
        host, sep, port = part.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {part!r} must be host:port")
    return host, int(port)


def url_problem(url: object) -> str | None:
    """Why `url` is not a Redis URL kbgate accepts, or None. Never echoes a password."""
    if not isinstance(url, str):
        return "must be a string"
    for scheme, parse in ((SENTINEL_SCHEME, parse_sentinel_url), (CLUSTER_SCHEME, parse_cluster_url)):
        if url.startswith(scheme):
            try:
                parse(url)
            except ValueError as exc:
                return str(exc)
            return None
    if not url.startswith(PLAIN_SCHEMES):
        return "must be a redis://, rediss://, unix://, redis+sentinel:// or redis+cluster:// URL"
    return None


def describe(url: str) -> str:
    """A one-line, password-free description for logs and `check-config`: 'redis',
    'redis sentinel (service S, N sentinels)' or 'redis cluster (N nodes named)'."""
    if url.startswith(SENTINEL_SCHEME):
        t = parse_sentinel_url(url)
        return f"redis sentinel (service {t.service}, {len(t.sentinels)} sentinels)"
    if url.startswith(CLUSTER_SCHEME):
        return f"redis cluster ({len(parse_cluster_url(url).nodes)} nodes named)"
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


class _AsyncCluster(aiocluster.RedisCluster):
    """redis-py's asyncio cluster client, whose failures are all RedisError: redis-py raises
    RedisClusterException (not a RedisError) when no node answers or a slot has no primary,
    and every user of kbgate's clients catches RedisError, as for one Redis."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._initialize:
                # redis-py 8 resolves a command's policy before it reads the slot map: a burst of
                # commands on a client not yet initialized had connections closed under it
                # ("Connection closed by server", an AttributeError on a dropped writer), and a
                # claim re-sent after one ran twice. Reading the map first (once, under
                # redis-py's own lock) avoids it: tests/core/test_redis_cluster.py.
                await self.initialize()
            return await super().execute_command(*args, **kwargs)
        except RedisClusterException as exc:
            raise RedisConnectionError(f"redis cluster: {exc}") from exc

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> aiocluster.ClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        return _AsyncClusterPipeline(self, transaction)  # type: ignore[abstract]  # as redis-py builds it


class _AsyncClusterPipeline(aiocluster.ClusterPipeline):
    __slots__ = ()

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        try:
            return await super().execute(raise_on_error, allow_redirections)
        except RedisClusterException as exc:
            raise RedisConnectionError(f"redis cluster: {exc}") from exc


class _SyncCluster(redis.cluster.RedisCluster):
    """The blocking twin of `_AsyncCluster`."""

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().execute_command(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisClusterException as exc:
            raise RedisConnectionError(f"redis cluster: {exc}") from exc

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> redis.cluster.ClusterPipeline:
        pipe: redis.cluster.ClusterPipeline = super().pipeline(transaction, shard_hint)  # type: ignore[no-untyped-call]
        pipe.__class__ = _SyncClusterPipeline  # built by redis-py with its own arguments; same layout
        return pipe


class _SyncClusterPipeline(redis.cluster.ClusterPipeline):
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return super().execute(raise_on_error)
        except RedisClusterException as exc:
            raise RedisConnectionError(f"redis cluster: {exc}") from exc


def _cluster_kwargs(t: ClusterTarget, timeout: float) -> dict[str, Any]:
    # One retry after re-reading the slot map (a failed-over primary), never a backoff sleep:
    # redis-py's default retries three times with exponential backoff.
    return {"username": t.username, "password": t.password, "socket_timeout": timeout,
            "socket_connect_timeout": timeout, "health_check_interval": HEALTH_CHECK_INTERVAL}


def _sentinel_primary(url: str, timeout: float, sentinel_class: Any, redis_class: Any, retry_class: Any) -> Any:
    """The client of a `redis+sentinel://` URL's current primary, built from the asyncio or the
    blocking twins (`sentinel_class`, `redis_class`, `retry_class`): the sentinels asked with
    no retry, the primary's commands retried once."""
    t = parse_sentinel_url(url)
    sentinel = sentinel_class(list(t.sentinels), sentinel_kwargs=_sentinel_kwargs(timeout, retry_class(NoBackoff(), 0)))
    return sentinel.master_for(t.service, redis_class=redis_class, db=t.db, username=t.username,
                               password=t.password, retry=retry_class(NoBackoff(), 1), **_common(timeout))


def async_client(url: str, timeout: float) -> AsyncRedis:
    """An asyncio client for `url` (see the module docstring for forms, timeouts, retry).

    timeout: seconds, for connecting (including asking the sentinels) and per command.
    Raises ValueError for a malformed `redis+sentinel://` or `redis+cluster://` URL. Close
    with `await c.aclose()`.
    """
    if url.startswith(CLUSTER_SCHEME):
        c = parse_cluster_url(url)
        return _AsyncCluster(startup_nodes=[aiocluster.ClusterNode(h, p) for h, p in c.nodes],
                             retry=AsyncRetry(NoBackoff(), 1), **_cluster_kwargs(c, timeout))
    if url.startswith(SENTINEL_SCHEME):
        client: aioredis.Redis = _sentinel_primary(url, timeout, AsyncSentinel, _SentinelRedis, AsyncRetry)
        return client
    return aioredis.Redis.from_url(url, retry=AsyncRetry(NoBackoff(), 1), **_common(timeout))


class _SyncSentinelRedis(redis.Redis):
    """The synchronous twin of `_SentinelRedis`."""

    def close(self) -> None:
        pool = self.connection_pool
        super().close()
        manager = getattr(pool, "sentinel_manager", None)
        for s in getattr(manager, "sentinels", ()):
            s.close()


def sync_client(url: str, timeout: float) -> SyncRedis:
    """A blocking client for `url`, for the CLI (`kbgate secrets list`, `onboard`).

    Same forms, timeouts and retry as `async_client`. Close with `c.close()`.
    """
    if url.startswith(CLUSTER_SCHEME):
        c = parse_cluster_url(url)
        nodes = [redis.cluster.ClusterNode(h, p) for h, p in c.nodes]  # type: ignore[no-untyped-call]
        try:  # redis-py's blocking cluster client reads the slot map at once
            return _SyncCluster(startup_nodes=nodes, retry=Retry(NoBackoff(), 1), **_cluster_kwargs(c, timeout))
        except RedisClusterException as exc:
            raise RedisConnectionError(f"redis cluster: {exc}") from exc
    if url.startswith(SENTINEL_SCHEME):
        client: redis.Redis = _sentinel_primary(url, timeout, Sentinel, _SyncSentinelRedis, Retry)
        return client
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 1), **_common(timeout))
