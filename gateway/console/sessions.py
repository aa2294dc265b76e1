"""Console login sessions: what the `kbgate_admin` cookie holds after a login through the form.

Rationale: docs/design-notes.md, "gateway/console/sessions.py".
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from itsdangerous import BadSignature, URLSafeSerializer
from redis.exceptions import RedisError

from gateway.core.config import Config
from gateway.core.redis_clients import async_client

log = logging.getLogger("kbgate.console")

LIFETIME = 8 * 3600  # seconds: one working day, then log in again
MAX_REVOKED = 10_000
SALT = "kbgate-console-session"
KEY_FILE = "console-session.key"
"""The session key file made beside the config when no session secret is configured."""


class SessionsUnavailable(Exception):
    """Redis, which holds the revocations, did not answer: no session can be checked now."""


def session_key(config: Config) -> bytes:
    """The 32-byte key sessions (and device cookies) are signed with (module doc). Raises
    nothing: a key file that cannot be made or read falls back to a key of this process, with
    a warning naming the keys that fix it."""
    if config.admin.session_secret is not None:
        return hashlib.sha256(b"kbgate-console-session-key\0" + config.admin.session_secret.reveal().encode()).digest()
    if config.source is None:
        return secrets.token_bytes(32)
    path = Path(config.source).parent / KEY_FILE
    try:
        return _key_file(path)
    except OSError as exc:
        log.warning("console sessions signed with this process's own key (set admin.session_secret_file or "
                    "admin.session_secret_env so every worker shares one)",
                    extra={"file": str(path), "problem": exc.strerror or type(exc).__name__})
        return secrets.token_bytes(32)


def _key_file(path: Path) -> bytes:
    """32 bytes from `path`, made (O_EXCL, mode 600) by the first worker that finds none."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
            f.flush()
            os.fsync(f.fileno())
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    for _ in range(50):  # another worker may be writing it this instant
        key = path.read_bytes()
        if len(key) == 32:
            return key
        time.sleep(0.02)
    raise OSError(0, f"{path} does not hold a 32-byte key")


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
    token) while the session counts, else None; revoke(cookie) ends it. key: what sessions
    are signed with (device cookies too, gateway.console.device)."""

    key: bytes

    async def issue(self, config: Config, name: str) -> str: ...

    async def name_of(self, config: Config, cookie: str) -> str | None: ...

    async def revoke(self, cookie: str) -> None: ...

    async def close(self) -> None: ...


class _Signed:
    """The signing and the checks every store shares; the revocation set differs. key: 32 bytes
    (`session_key`)."""

    def __init__(self, now: Callable[[], float], key: bytes) -> None:
        self.now = now
        self.key = key

    async def _key(self) -> bytes:
        return self.key

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
    """Revocations in this process (module doc). key: None for one of this process."""

    def __init__(self, now: Callable[[], float], max_revoked: int = MAX_REVOKED, key: bytes | None = None) -> None:
        super().__init__(now, key if key is not None else secrets.token_bytes(32))
        self.max_revoked = max_revoked
        self._revoked_until: dict[str, float] = {}

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
    """The revocations in Redis, shared by every worker and replica (module doc)."""

    def __init__(self, url: str, prefix: str, timeout: float, now: Callable[[], float], key: bytes) -> None:
        super().__init__(now, key)
        self.client = async_client(url, timeout)
        self.prefix = prefix

    async def issue(self, config: Config, name: str) -> str:
        """Raises SessionsUnavailable when Redis does not answer: the next page could not
        check the session, so no login is answered as done."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as exc:
            raise SessionsUnavailable(type(exc).__name__) from None
        return await super().issue(config, name)

    async def name_of(self, config: Config, cookie: str) -> str | None:
        """Raises SessionsUnavailable when Redis does not answer."""
        try:
            return await super().name_of(config, cookie)
        except (RedisError, OSError) as exc:
            raise SessionsUnavailable(type(exc).__name__) from None

    async def _revoked(self, sid: str) -> bool:
        return bool(await self.client.exists(f"{self.prefix}:console-session-revoked:{sid}"))

    async def _add_revoked(self, sid: str, seconds: float) -> None:
        await self.client.set(f"{self.prefix}:console-session-revoked:{sid}", b"1", ex=max(1, int(seconds) + 1))

    async def close(self) -> None:
        await self.client.aclose()


def make_sessions(config: Config, now: Callable[[], float]) -> Sessions:
    """Revocations in Redis when `replay.redis_url` is set, else in this process's memory; the
    key from `session_key`."""
    r = config.replay
    key = session_key(config)
    if r.redis_url:
        return RedisSessions(r.redis_url, r.key_prefix, r.timeout_seconds, now, key)
    return MemorySessions(now, key=key)
