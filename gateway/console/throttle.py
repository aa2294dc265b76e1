"""The limit on failed console logins: per user name and per client address, in a fixed window.

A failed POST /admin/login counts against two keys, 'user:NAME' ('user:' for the admin token)
and 'addr:HOST' (the peer address the server sees). While either key has MAX_FAILURES[kind]
failures in its WINDOW-second window, the login form answers 429 with Retry-After (the seconds
left in that window) without checking the credential. A success does not reset the count (a
correct guess among many still counted them). Keys are stored as a SHA-256 of kind and value;
what was typed as a credential never reaches this module.

- `RedisThrottle` when `replay.redis_url` is set: every worker and replica shares the counts,
  key '{prefix}:console-login-fail:{digest}', INCR then EXPIRE on the first failure. A Redis
  that does not answer fails open (the login proceeds; one warning line at most every 10 s).
- `MemoryThrottle` otherwise: this process's counts, at most MAX_KEYS keys (the oldest go first).

Why these numbers: docs/console.md, "Getting in".
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

WINDOW = 300  # seconds
MAX_FAILURES = {"user": 5, "addr": 20}  # per window: a name is guessed at slowly, an office shares an address
MAX_KEYS = 10_000
WARN_EVERY = 10.0


def keys(name: str, address: str | None) -> list[tuple[str, str]]:
    """The (kind, digest) keys a login attempt as `name` from `address` counts against."""
    out = [("user", name)] + ([("addr", address)] if address else [])
    return [(kind, hashlib.sha256(f"{kind}\0{value}".encode()).hexdigest()[:32]) for kind, value in out]


class Throttle(Protocol):
    """retry_after(keys) → seconds to wait (int ≥ 1) while any key is over its limit, else None;
    failed(keys) counts one failure against each."""

    async def retry_after(self, keys: list[tuple[str, str]]) -> int | None: ...

    async def failed(self, keys: list[tuple[str, str]]) -> None: ...

    async def close(self) -> None: ...


class MemoryThrottle:
    """Counts in this process. now: the clock (unix s)."""

    def __init__(self, now: Callable[[], float] = time.time, window: int = WINDOW, max_keys: int = MAX_KEYS) -> None:
        self.now, self.window, self.max_keys = now, window, max_keys
        self._counts: dict[str, tuple[float, int]] = {}  # digest → (window end, failures)

    async def retry_after(self, keys: list[tuple[str, str]]) -> int | None:
        now = self.now()
        waits = [end - now for kind, k in keys if (entry := self._counts.get(k)) is not None
                 for end, n in [entry] if end > now and n >= MAX_FAILURES[kind]]
        return max(1, math.ceil(max(waits))) if waits else None

    async def failed(self, keys: list[tuple[str, str]]) -> None:
        now = self.now()
        for _, k in keys:
            end, n = self._counts.get(k, (0.0, 0))
            if end <= now:
                end, n = now + self.window, 0
                self._counts.pop(k, None)
                while len(self._counts) >= self.max_keys:
                    self._counts.pop(next(iter(self._counts)))
            self._counts[k] = (end, n + 1)

    async def close(self) -> None:
        return None


class RedisThrottle:
    """Counts in Redis, shared by every worker and replica (module doc)."""

    def __init__(self, url: str, prefix: str, timeout: float, window: int = WINDOW) -> None:
        self.client = async_client(url, timeout)
        self.prefix, self.window = prefix, window
        self._warned = 0.0

    def _key(self, digest: str) -> str:
        return f"{self.prefix}:console-login-fail:{digest}"

    def _warn(self, exc: RedisError) -> None:
        if time.monotonic() - self._warned >= WARN_EVERY:
            self._warned = time.monotonic()
            log.warning("login limit not shared: Redis did not answer", extra={"problem": type(exc).__name__})

    async def retry_after(self, keys: list[tuple[str, str]]) -> int | None:
        waits = []
        try:
            for kind, k in keys:
                n = await self.client.get(self._key(k))
                if n is not None and int(n) >= MAX_FAILURES[kind]:
                    left = int(await self.client.ttl(self._key(k)))
                    if left < 0:  # the EXPIRE after the first INCR never ran
                        await self.client.expire(self._key(k), self.window)
                        left = self.window
                    waits.append(left)
        except RedisError as exc:
            self._warn(exc)
            return None
        return max(1, max(waits)) if waits else None

    async def failed(self, keys: list[tuple[str, str]]) -> None:
        try:
            for _, k in keys:
                if await self.client.incr(self._key(k)) == 1:
                    await self.client.expire(self._key(k), self.window)
        except RedisError as exc:
            self._warn(exc)

    async def close(self) -> None:
        await self.client.aclose()


def make_throttle(config: Config, now: Callable[[], float]) -> Throttle:
    """Redis when `replay.redis_url` is set, else this process's memory."""
    r = config.replay
    if r.redis_url:
        return RedisThrottle(r.redis_url, r.key_prefix, r.timeout_seconds)
    return MemoryThrottle(now)
