"""What a console POST hands to the page its redirect leads to (POST-redirect-GET): a new key
or credential to show once, a connectivity test's answer. Never in the URL: the redirect
names only a random id.

Rationale: docs/design-notes.md, "gateway/console/once.py".
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any, Protocol

import orjson
from redis.exceptions import RedisError

from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.redis_clients import async_client

TTL = 600  # seconds a note waits for its page
MAX_NOTES = 1000  # MemoryOnce: the oldest notes go first beyond this
ID_CHARS = 22  # token_urlsafe(16)
UNAVAILABLE = "the console's notes (Redis) are not answering"


def _stream(login: str, note_id: str, n: int) -> bytes:
    key = login.encode("utf-8")
    out = b""
    block = 0
    while len(out) < n:
        out += hmac.new(key, f"kbgate-once:{note_id}:{block}".encode(), hashlib.sha256).digest()
        block += 1
    return out[:n]


def seal(login: str, note_id: str, data: dict[str, Any]) -> bytes:
    """`data` as JSON, XORed with the keystream of (login, id), behind its 32-byte tag."""
    plain = orjson.dumps(data)
    cipher = bytes(a ^ b for a, b in zip(plain, _stream(login, note_id, len(plain)), strict=True))
    tag = hmac.new(login.encode("utf-8"), b"kbgate-once-tag:" + note_id.encode() + cipher, hashlib.sha256).digest()
    return tag + cipher


def unseal(login: str, note_id: str, blob: bytes) -> dict[str, Any] | None:
    """The note sealed by `seal(login, note_id, ...)`, or None (another login, a forged blob)."""
    tag, cipher = blob[:32], blob[32:]
    want = hmac.new(login.encode("utf-8"), b"kbgate-once-tag:" + note_id.encode() + cipher, hashlib.sha256).digest()
    if len(blob) < 32 or not hmac.compare_digest(tag, want):
        return None
    plain = bytes(a ^ b for a, b in zip(cipher, _stream(login, note_id, len(cipher)), strict=True))
    data = orjson.loads(plain)
    return data if isinstance(data, dict) else None


def valid_id(note_id: str) -> bool:
    """True for an id `put` could have made (22 URL-safe characters)."""
    return len(note_id) == ID_CHARS and all(c.isascii() and (c.isalnum() or c in "-_") for c in note_id)


class OnceStore(Protocol):
    """put(login, data) → id; get(login, id, take=True) → the note or None (expired, taken, not
    this login's). take: delete it as it is read (a secret shown once). Both raise
    DependencyUnavailable when Redis does not answer."""

    async def put(self, login: str, data: dict[str, Any]) -> str: ...

    async def get(self, login: str, note_id: str, *, take: bool = True) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


class MemoryOnce:
    """Notes in this process (one worker)."""

    def __init__(self, ttl: float = TTL) -> None:
        self.ttl = ttl
        self._notes: dict[str, tuple[float, bytes]] = {}

    async def put(self, login: str, data: dict[str, Any]) -> str:
        now = time.monotonic()
        self._notes = {k: v for k, v in self._notes.items() if v[0] > now}
        while len(self._notes) >= MAX_NOTES:
            self._notes.pop(next(iter(self._notes)))
        note_id = secrets.token_urlsafe(16)
        self._notes[note_id] = (now + self.ttl, seal(login, note_id, data))
        return note_id

    async def get(self, login: str, note_id: str, *, take: bool = True) -> dict[str, Any] | None:
        entry = self._notes.get(note_id)
        if entry is None or entry[0] <= time.monotonic():
            return None
        data = unseal(login, note_id, entry[1])
        if data is not None and take:
            del self._notes[note_id]
        return data

    async def close(self) -> None:
        return None


class RedisOnce:
    """Notes in Redis, seen by every worker (module doc)."""

    def __init__(self, url: str, prefix: str, timeout: float, ttl: int = TTL) -> None:
        self.client = async_client(url, timeout)
        self.prefix = prefix
        self.ttl = ttl

    def _key(self, note_id: str) -> str:
        return f"{self.prefix}:console-once:{note_id}"

    async def put(self, login: str, data: dict[str, Any]) -> str:
        note_id = secrets.token_urlsafe(16)
        try:
            await self.client.set(self._key(note_id), seal(login, note_id, data), ex=self.ttl)
        except (RedisError, OSError) as exc:
            raise DependencyUnavailable("replay_store_unavailable", UNAVAILABLE) from exc
        return note_id

    async def get(self, login: str, note_id: str, *, take: bool = True) -> dict[str, Any] | None:
        try:
            blob = await self.client.get(self._key(note_id))
            raw = blob.encode("latin-1") if isinstance(blob, str) else blob  # decode_responses is off: bytes
            data = None if raw is None else unseal(login, note_id, bytes(raw))
            if data is not None and take and not await self.client.delete(self._key(note_id)):
                data = None  # another request took it first: shown once
        except (RedisError, OSError) as exc:
            raise DependencyUnavailable("replay_store_unavailable", UNAVAILABLE) from exc
        return data

    async def close(self) -> None:
        await self.client.aclose()


def make_once(config: Config) -> OnceStore:
    """RedisOnce when `replay.redis_url` is set, else MemoryOnce."""
    if config.replay.redis_url:
        return RedisOnce(config.replay.redis_url, config.replay.key_prefix, config.replay.timeout_seconds)
    return MemoryOnce()
