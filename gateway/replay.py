"""Replay protection: claim each (tenant, timestamp, nonce) once.

A claim is made only after the signature verifies (so an attacker cannot burn
nonces), with one atomic `SET key 1 NX EX (ts+tolerance+1-now)`: the claim lives as long
as that timestamp stays acceptable, not merely `tolerance` seconds from now.
Two stores behind the `NonceStore` interface (gateway.types):

- `RedisNonceStore`: shared by every worker and replica. Fails closed: when Redis does
  not answer within `timeout` seconds, `DependencyUnavailable('replay_store_unavailable')`.
- `MemoryNonceStore`: the embedded default when no Redis is configured; one process only.
"""

from __future__ import annotations

import asyncio
import heapq

from redis.exceptions import RedisError

from gateway.clock import SYSTEM_CLOCK
from gateway.errors import DependencyUnavailable
from gateway.redis_clients import async_client
from gateway.types import Clock


def nonce_key(prefix: str, tenant: str, timestamp: str, nonce: str) -> str:
    """Redis key of one delivery: '{prefix}:nonce:{tenant}:{timestamp}:{nonce}'.

    The nonce is case-sensitive (seed 003), so it is used as sent.
    """
    return f"{prefix}:nonce:{tenant}:{timestamp}:{nonce}"


def claim_expiry(timestamp: int, tolerance: int) -> int:
    """Unix second after which a claim for `timestamp` may vanish: ts + tolerance + 1.

    After that instant the timestamp itself fails the tolerance check, so a replay is
    rejected anyway.
    """
    return timestamp + tolerance + 1


class MemoryNonceStore:
    """In-process nonce claims with expiry (embedded default, one worker only)."""

    shared = False

    def __init__(self, clock: Clock = SYSTEM_CLOCK, max_entries: int = 1_000_000) -> None:
        self._clock = clock
        self._claims: dict[str, int] = {}
        self._expiries: list[tuple[int, str]] = []
        self._max = max_entries

    async def claim(self, key: str, expire_at: int) -> bool:
        """Claim `key` until `expire_at` (unix s). True if this call claimed it first."""
        now = self._clock.now()
        self._purge(now)
        held = self._claims.get(key)
        if held is not None and held > now:
            return False
        if len(self._claims) >= self._max:
            # Refuse rather than forget a live claim: forgetting would allow a replay.
            raise DependencyUnavailable("replay_store_unavailable", "in-process nonce store is full")
        self._claims[key] = expire_at
        heapq.heappush(self._expiries, (expire_at, key))
        return True

    def _purge(self, now: float) -> None:
        while self._expiries and self._expiries[0][0] <= now:
            at, key = heapq.heappop(self._expiries)
            if self._claims.get(key) == at:
                del self._claims[key]

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._claims.clear()
        self._expiries.clear()

    def __len__(self) -> int:
        return len(self._claims)


class RedisNonceStore:
    """Nonce claims in Redis, shared by every worker. Fails closed within `timeout` seconds.

    url: a Redis URL (gateway.redis_clients: redis://, rediss://, unix://, redis+sentinel://).
    timeout: seconds for connect and for each command.
    """

    shared = True

    def __init__(self, url: str, timeout: float = 1.0, clock: Clock = SYSTEM_CLOCK) -> None:
        self._timeout = timeout
        self._clock = clock
        # One immediate retry on a broken connection, never on a timeout (gateway.redis_clients).
        self.client = async_client(url, timeout)

    async def claim(self, key: str, expire_at: int) -> bool:
        """One atomic `SET key 1 NX EX ttl`, ttl = expire_at − now by our clock (≥ 1 s).

        The expiry is computed from the one clock seam rather than sent as EXAT, so the
        window is the one the tolerance check used. Raises DependencyUnavailable on failure.
        """
        ttl = max(1, int(expire_at - self._clock.now()) + 1)
        try:
            async with asyncio.timeout(self._timeout):
                ok = await self.client.set(key, b"1", nx=True, ex=ttl)
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable") from None
        return bool(ok)

    async def ping(self) -> bool:
        """True when Redis answers PING within the timeout."""
        try:
            async with asyncio.timeout(self._timeout):
                return bool(await self.client.ping())
        except (RedisError, OSError, TimeoutError):
            return False

    async def close(self) -> None:
        await self.client.aclose()


def make_store(
    redis_url: str | None, timeout: float, clock: Clock = SYSTEM_CLOCK
) -> MemoryNonceStore | RedisNonceStore:
    """The configured store: Redis when `redis_url` is set, else the in-process one."""
    if redis_url:
        return RedisNonceStore(redis_url, timeout, clock)
    return MemoryNonceStore(clock)
