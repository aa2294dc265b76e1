"""The limit on failed console logins: exponential backoff per user name, per client address and
per device, instead of a lockout a stranger could hold.

Rationale: docs/design-notes.md, "gateway/console/throttle.py".
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import Protocol

from redis.exceptions import RedisError

from gateway.core.config import Config
from gateway.core.redis_clients import async_client

log = logging.getLogger("kbgate.console")

FREE = {"user": 5, "addr": 20, "device": 5}  # failures before a key waits
BASE_SECONDS = 1.0
MAX_WAIT_SECONDS = 15 * 60
FORGET_SECONDS = 24 * 3600
MAX_KEYS = 10_000
WARN_EVERY = 10.0
Key = tuple[str, str]


def keys(name: str | None, address: str | None, device: str | None = None) -> list[Key]:
    """The (kind, digest) keys an attempt counts against: `name` (None for the admin token, which
    has no name key), the client `address`, the browser's `device` id."""
    out = [(kind, value) for kind, value in (("user", name), ("addr", address), ("device", device))
           if value is not None]
    return [(kind, hashlib.sha256(f"{kind}\0{value}".encode()).hexdigest()[:32]) for kind, value in out]


def wait_after(kind: str, failures: int) -> float:
    """Seconds a key of `kind` waits after its `failures`-th failure: 0 for the first FREE[kind],
    then BASE_SECONDS x 2^(failures - FREE - 1), at most MAX_WAIT_SECONDS."""
    over = failures - FREE[kind]
    if over <= 0:
        return 0.0
    return min(BASE_SECONDS * 2.0 ** min(over - 1, 30), MAX_WAIT_SECONDS)


def _left(kind: str, failures: int, last: float, now: float) -> float:
    if now - last >= FORGET_SECONDS:
        return 0.0
    return last + wait_after(kind, failures) - now


class Throttle(Protocol):
    """retry_after(keys) → seconds to wait (int ≥ 1) while any key waits, else None;
    failed(keys) counts one failure against each."""

    async def retry_after(self, keys: list[Key]) -> int | None: ...

    async def failed(self, keys: list[Key]) -> None: ...

    async def close(self) -> None: ...


def _wait(lefts: list[float]) -> int | None:
    left = max(lefts, default=0.0)
    return max(1, math.ceil(left)) if left > 0 else None


class MemoryThrottle:
    """Counts in this process. now: the clock (unix s)."""

    def __init__(self, now: Callable[[], float] = time.time, max_keys: int = MAX_KEYS) -> None:
        self.now, self.max_keys = now, max_keys
        self._counts: dict[str, tuple[int, float]] = {}  # digest → (failures, last failure)

    async def retry_after(self, keys: list[Key]) -> int | None:
        now = self.now()
        return _wait([_left(kind, *self._counts[k], now) for kind, k in keys if k in self._counts])

    async def failed(self, keys: list[Key]) -> None:
        now = self.now()
        for _, k in keys:
            n, last = self._counts.pop(k, (0, 0.0))
            if now - last >= FORGET_SECONDS:
                n = 0
            while len(self._counts) >= self.max_keys:
                self._counts.pop(next(iter(self._counts)))
            self._counts[k] = (n + 1, now)

    async def close(self) -> None:
        return None


class RedisThrottle:
    """Counts in Redis, shared by every worker and replica (module doc). now: the clock."""

    def __init__(self, url: str, prefix: str, timeout: float, now: Callable[[], float] = time.time) -> None:
        self.client = async_client(url, timeout)
        self.prefix, self.now = prefix, now
        self._warned = 0.0

    def _key(self, digest: str) -> str:
        return f"{self.prefix}:console-login-fail:{digest}"

    def _warn(self, exc: RedisError) -> None:
        if time.monotonic() - self._warned >= WARN_EVERY:
            self._warned = time.monotonic()
            log.warning("login limit not shared: Redis did not answer", extra={"problem": type(exc).__name__})

    async def retry_after(self, keys: list[Key]) -> int | None:
        now = self.now()
        lefts = []
        try:
            for kind, k in keys:
                got = await self.client.hmget(self._key(k), ["n", "t"])
                if got[0] is not None and got[1] is not None:
                    lefts.append(_left(kind, int(got[0]), float(got[1]), now))
        except (RedisError, ValueError) as exc:
            self._warn(exc if isinstance(exc, RedisError) else RedisError(str(exc)))
            return None
        return _wait(lefts)

    async def failed(self, keys: list[Key]) -> None:
        now = self.now()
        try:
            for _, k in keys:
                name = self._key(k)
                last = await self.client.hget(name, "t")
                pipe = self.client.pipeline(transaction=True)
                if last is not None and now - float(last) >= FORGET_SECONDS:
                    pipe.hset(name, "n", 0)
                pipe.hincrby(name, "n", 1)
                pipe.hset(name, "t", repr(now))
                pipe.expire(name, FORGET_SECONDS)
                await pipe.execute()
        except (RedisError, ValueError) as exc:
            self._warn(exc if isinstance(exc, RedisError) else RedisError(str(exc)))

    async def close(self) -> None:
        await self.client.aclose()


def make_throttle(config: Config, now: Callable[[], float]) -> Throttle:
    """Redis when `replay.redis_url` is set, else this process's memory."""
    r = config.replay
    if r.redis_url:
        return RedisThrottle(r.redis_url, r.key_prefix, r.timeout_seconds, now)
    return MemoryThrottle(now)
