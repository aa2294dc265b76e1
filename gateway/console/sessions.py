"""Console login sessions: what the `kbgate_admin` cookie holds after a login through the form.

The cookie is {"u": user name ('' for the admin token), "sid": 128 random bits, "iat": unix s
issued, "f": a fingerprint of the stored credential} signed with itsdangerous'
URLSafeSerializer (HMAC-SHA1 over a key derived per salt) under the session key. A cookie counts
while all hold: the signature verifies; `iat` is at most LIFETIME seconds ago on the clock seam;
the user still exists and `f` matches the credential configured now (changing a user's
credential, removing the user or changing the admin token ends their sessions at the next
reload); and `sid` was not revoked by logout.

- `RedisSessions` when `replay.redis_url` is set: the session key is made once (SET NX,
  '{prefix}:console-session-key', 32 random bytes) and read by every worker and replica, so
  a session signed by one is honoured by all; a revoked id is '{prefix}:console-session-revoked:{sid}'
  with EX = the session's remaining lifetime. A Redis that does not answer refuses the cookie
  (log in again later; Bearer credentials keep working).
- `MemorySessions` otherwise (one worker: the config refuses workers > 1 without Redis): a key
  made at start, so a restart ends every session; revoked ids in a dict of at most MAX_REVOKED,
  expired ones dropped first (beyond that, the oldest revocation is forgotten). A replica
  without Redis signs with its own key: its sessions are honoured only by itself.

Why: docs/console.md, "Getting in".
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any, Protocol

from itsdangerous import BadSignature, URLSafeSerializer
from redis.exceptions import RedisError

from gateway.core.config import Config
from gateway.core.redis_clients import async_client

LIFETIME = 8 * 3600  # seconds: one working day, then log in again
MAX_REVOKED = 10_000
SALT = "kbgate-console-session"


def fingerprint(config: Config, name: str) -> str | None:
    """16 hex of SHA-256 over what `name` ('' : the admin token) logs in with now; None when
    that login no longer exists."""
    if not name:
        stored = config.admin.token_sha256
    else:
        stored = next((u.credential for u in config.admin.users if u.name == name), None)
    return None if stored is None else hashlib.sha256(f"{name}\0{stored}".encode()).hexdigest()[:16]


class Sessions(Protocol):
    """issue(config, name) → cookie value; name_of(config, cookie) → the user name ('' admin
    token) while the session counts, else None; revoke(cookie) ends it."""

    async def issue(self, config: Config, name: str) -> str: ...

    async def name_of(self, config: Config, cookie: str) -> str | None: ...

    async def revoke(self, cookie: str) -> None: ...

    async def close(self) -> None: ...


class _Signed:
    """The signing and the checks every store shares; `_key()` and the revocation set differ."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now

    async def _key(self) -> bytes:
        raise NotImplementedError

    async def _revoked(self, sid: str) -> bool:
        raise NotImplementedError

    async def _add_revoked(self, sid: str, seconds: float) -> None:
        raise NotImplementedError

    async def _payload(self, cookie: str) -> dict[str, Any] | None:
        try:
            data = URLSafeSerializer(await self._key(), salt=SALT).loads(cookie)
        except (BadSignature, UnicodeError, ValueError):
            return None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), t) for k, t in
                                                 (("u", str), ("sid", str), ("f", str), ("iat", int | float))):
            return None
        return data

    async def issue(self, config: Config, name: str) -> str:
        data = {"u": name, "sid": secrets.token_urlsafe(16), "iat": int(self.now()), "f": fingerprint(config, name)}
        return str(URLSafeSerializer(await self._key(), salt=SALT).dumps(data))

    async def name_of(self, config: Config, cookie: str) -> str | None:
        data = await self._payload(cookie)
        if data is None or not 0 <= self.now() - data["iat"] < LIFETIME:
            return None
        if fingerprint(config, data["u"]) != data["f"] or await self._revoked(data["sid"]):
            return None
        name: str = data["u"]
        return name

    async def revoke(self, cookie: str) -> None:
        data = await self._payload(cookie)
        if data is not None:
            left = LIFETIME - (self.now() - data["iat"])
            if left > 0:
                await self._add_revoked(data["sid"], left)


class MemorySessions(_Signed):
    """A key of this process and its revocations (module doc)."""

    def __init__(self, now: Callable[[], float], max_revoked: int = MAX_REVOKED) -> None:
        super().__init__(now)
        self.key = secrets.token_bytes(32)
        self.max_revoked = max_revoked
        self._revoked_until: dict[str, float] = {}

    async def _key(self) -> bytes:
        return self.key

    async def _revoked(self, sid: str) -> bool:
        return self._revoked_until.get(sid, 0.0) > self.now()

    async def _add_revoked(self, sid: str, seconds: float) -> None:
        now = self.now()
        if len(self._revoked_until) >= self.max_revoked:
            self._revoked_until = {k: v for k, v in self._revoked_until.items() if v > now}
        while len(self._revoked_until) >= self.max_revoked:
            self._revoked_until.pop(next(iter(self._revoked_until)))
        self._revoked_until[sid] = now + seconds

    async def close(self) -> None:
        return None


class RedisSessions(_Signed):
    """The key and the revocations in Redis, shared by every worker and replica (module doc)."""

    def __init__(self, url: str, prefix: str, timeout: float, now: Callable[[], float]) -> None:
        super().__init__(now)
        self.client = async_client(url, timeout)
        self.prefix = prefix
        self.key: bytes | None = None

    async def _key(self) -> bytes:
        if self.key is None:
            name = f"{self.prefix}:console-session-key"
            await self.client.set(name, secrets.token_bytes(32), nx=True)
            key = await self.client.get(name)
            if not isinstance(key, bytes) or len(key) != 32:
                raise ValueError("the console's session key in Redis is not 32 bytes")
            self.key = key
        return self.key

    async def _payload(self, cookie: str) -> dict[str, Any] | None:
        try:
            return await super()._payload(cookie)
        except RedisError:
            return None

    async def name_of(self, config: Config, cookie: str) -> str | None:
        try:
            return await super().name_of(config, cookie)
        except RedisError:
            return None

    async def _revoked(self, sid: str) -> bool:
        return bool(await self.client.exists(f"{self.prefix}:console-session-revoked:{sid}"))

    async def _add_revoked(self, sid: str, seconds: float) -> None:
        await self.client.set(f"{self.prefix}:console-session-revoked:{sid}", b"1", ex=max(1, int(seconds) + 1))

    async def close(self) -> None:
        await self.client.aclose()


def make_sessions(config: Config, now: Callable[[], float]) -> Sessions:
    """Redis when `replay.redis_url` is set, else this process's memory."""
    r = config.replay
    if r.redis_url:
        return RedisSessions(r.redis_url, r.key_prefix, r.timeout_seconds, now)
    return MemorySessions(now)
