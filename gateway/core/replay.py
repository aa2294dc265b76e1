"""Replay protection that never loses an answer: each delivery is answered at most once, and a
delivery we failed to answer can be retried.

Rationale: docs/design-notes.md, "gateway/core/replay.py".
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.errors import ClientDisconnected, DependencyUnavailable, Replayed
from gateway.core.redis_clients import async_client
from gateway.core.script_batch import Args, ScriptBatcher
from gateway.core.types import SECONDS, Clock, NonceStore, ReplayClaim

log = logging.getLogger("kbgate.replay")

PENDING_SECONDS = 3 * SECONDS  # an owner's time from claim to answer, before a retry may take over


def nonce_key(prefix: str, tenant: str, timestamp: str, nonce: str) -> str:
    """Redis key of one delivery: '{prefix}:nonce:{tenant}:{timestamp}:{nonce}'.

    The nonce is case-sensitive (the 联网问答Agent callback spec), so it is used as sent.
    """
    return f"{prefix}:nonce:{tenant}:{timestamp}:{nonce}"


def claim_expiry(timestamp: int, tolerance: int) -> int:
    """Unix second after which a claim for `timestamp` may vanish: ts + tolerance + 1.

    After that instant the timestamp itself fails the tolerance check, so a replay is
    rejected anyway.
    """
    return timestamp + tolerance + 1


async def answer_once(store: NonceStore, key: str, expire_at: int, answer: Callable[[], Awaitable[bytes]],
                      gone: Callable[[], bool] = lambda: False) -> bytes:
    """Build the answer of one delivery under its replay record (the state machine above).

    key: `nonce_key` of the delivery; expire_at: `claim_expiry` (unix s). `await answer()`:
    builds the 200's body (it may raise; the claim is then released so a retry is answered).
    gone(): True when the caller hung up before the answer was ready (nothing will reach it,
    so the claim is released instead of marked answered). Returns the body to send.
    Raises Replayed('replayed') when a 200 already went out for this delivery,
    Replayed('delivery_pending') when another request holds it, ClientDisconnected,
    DependencyUnavailable('replay_store_unavailable'), or whatever `answer` raises.
    """
    claim = await store.claim(key, expire_at)
    if claim.state != "claimed":
        raise _not_ours(claim.state)
    try:
        body = await answer()
        if gone():
            raise ClientDisconnected("client_disconnected")
        state = await store.answered(key, claim.owner, expire_at)
        if state != "recorded":
            raise _not_ours(state)
        return body
    except BaseException:
        await store.release(key, claim.owner)
        raise


def _not_ours(state: str) -> Replayed:
    """The 409 for a delivery another request answered ('answered') or is answering ('pending')."""
    if state == "answered":
        return Replayed("replayed", "this timestamp and nonce were already answered")
    return Replayed("delivery_pending", "an identical delivery is being answered right now; "
                    "if it fails, a retry after a few seconds is answered")


def new_owner() -> str:
    """A fresh owner token: 32 hex characters."""
    return uuid.uuid4().hex


# ------------------------------------------------------------------ in process


@dataclass(slots=True)
class _Record:
    answered: bool
    owner: str
    deadline: float  # unix s; meaningful while pending
    expire_at: int  # unix s


class MemoryNonceStore:
    """The claim state machine (module docstring) in this process's memory (one worker only).

    clock: the one clock seam. max_entries: live records kept at most; beyond that a claim
    raises DependencyUnavailable rather than forgetting a live one (which would allow a
    replay). pending_seconds: the owner's deadline (default PENDING_SECONDS).
    """

    shared = False

    def __init__(self, clock: Clock = SYSTEM_CLOCK, max_entries: int = 1_000_000,
                 pending_seconds: float = PENDING_SECONDS) -> None:
        self._clock = clock
        self._records: dict[str, _Record] = {}
        self._expiries: list[tuple[int, str]] = []
        self._max = max_entries
        self.pending_seconds = pending_seconds

    async def claim(self, key: str, expire_at: int) -> ReplayClaim:
        """Claim `key` until `expire_at` (unix s). See `NonceStore.claim`."""
        now = self._clock.now()
        self._purge(now)
        rec = self._records.get(key)
        if rec is not None and rec.expire_at > now:
            if rec.answered:
                return ReplayClaim("answered")
            if rec.deadline > now:
                return ReplayClaim("pending")
        if rec is None and len(self._records) >= self._max:
            raise DependencyUnavailable("replay_store_unavailable", "in-process nonce store is full")
        owner = new_owner()
        self._records[key] = _Record(False, owner, now + self.pending_seconds, expire_at)
        heapq.heappush(self._expiries, (expire_at, key))
        return ReplayClaim("claimed", owner)

    async def answered(self, key: str, owner: str, expire_at: int) -> str:
        """Record that `owner`'s 200 is leaving. See `NonceStore.answered`."""
        now = self._clock.now()
        rec = self._records.get(key)
        if rec is None or rec.expire_at <= now:
            self._records[key] = _Record(True, owner, 0.0, expire_at)
            heapq.heappush(self._expiries, (expire_at, key))
            return "recorded"
        if rec.owner != owner:
            return "answered" if rec.answered else "pending"
        rec.answered = True
        return "recorded"

    async def release(self, key: str, owner: str) -> None:
        """Drop `owner`'s record (pending or answered); another owner's stays."""
        rec = self._records.get(key)
        if rec is not None and rec.owner == owner:
            del self._records[key]

    def _purge(self, now: float) -> None:
        while self._expiries and self._expiries[0][0] <= now:
            at, key = heapq.heappop(self._expiries)
            rec = self._records.get(key)
            if rec is not None and rec.expire_at == at:
                del self._records[key]

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._records.clear()
        self._expiries.clear()

    def __len__(self) -> int:
        return len(self._records)


# ------------------------------------------------------------------ Redis

# KEYS[1] the delivery; ARGV: owner, now ms, deadline ms, ttl ms.
_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, 2) ~= 'p:' then return 'answered' end
  local deadline = tonumber(string.match(v, ':(%d+)$'))
  if deadline and deadline > tonumber(ARGV[2]) then return 'pending' end
end
redis.call('SET', KEYS[1], 'p:' .. ARGV[1] .. ':' .. ARGV[3], 'PX', ARGV[4])
return 'claimed'
"""

# KEYS[1] the delivery; ARGV: owner, ttl ms (for a record that vanished meanwhile).
_ANSWERED = """
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'a:' .. ARGV[1], 'PX', ARGV[2])
  return 'recorded'
end
if string.sub(v, 1, 2) ~= 'p:' then return 'answered' end
if string.match(v, '^p:([^:]*):') ~= ARGV[1] then return 'pending' end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = tonumber(ARGV[2]) end
redis.call('SET', KEYS[1], 'a:' .. ARGV[1], 'PX', ttl)
return 'recorded'
"""

# KEYS[1] the delivery; ARGV: owner.
_RELEASE = """
local v = redis.call('GET', KEYS[1])
if v and (v == 'a:' .. ARGV[1] or string.match(v, '^p:([^:]*):') == ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""


class RedisNonceStore:
    """The claim state machine (module docstring) in Redis, shared by every worker.

    url: a Redis URL (gateway.core.redis_clients: redis://, rediss://, unix://, redis+sentinel://,
    redis+cluster://; a script here touches one key, so needs no hash tag).
    timeout: seconds for connect and for each command; past it, DependencyUnavailable (fail
    closed). pending_seconds: the owner's deadline (default PENDING_SECONDS + timeout).
    """

    shared = True

    def __init__(self, url: str, timeout: float = 1.0, clock: Clock = SYSTEM_CLOCK,
                 pending_seconds: float | None = None) -> None:
        self._timeout = timeout
        self._clock = clock
        self.pending_seconds = PENDING_SECONDS + timeout if pending_seconds is None else pending_seconds
        # One immediate retry on a broken connection, never on a timeout (gateway.core.redis_clients).
        self.client = async_client(url, timeout)
        self._claim = self.client.register_script(_CLAIM)
        self._answered = self.client.register_script(_ANSWERED)
        self._release = self.client.register_script(_RELEASE)
        self._scripts = ScriptBatcher(self.client)  # calls waiting at once share a round trip

    async def _run(self, script, key: str, args: Args) -> object:  # type: ignore[no-untyped-def]
        try:
            async with asyncio.timeout(self._timeout):
                return await self._scripts.call(script, key, args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable("replay_store_unavailable", redis_problem(exc)) from None

    def _ttl_ms(self, expire_at: int, now: float) -> int:
        # The window is the one the tolerance check used: computed from the one clock seam,
        # not sent as PXAT in Redis' own time.
        return max(1000, int((expire_at - now) * 1000) + 1000)

    async def claim(self, key: str, expire_at: int) -> ReplayClaim:
        """One atomic script: create `pending` or take over an expired one. See `NonceStore.claim`.

        Raises DependencyUnavailable when Redis does not answer within the timeout.
        """
        now = self._clock.now()
        owner = new_owner()
        deadline_ms = int((now + self.pending_seconds) * 1000)
        state = _text(await self._run(self._claim, key, [owner, int(now * 1000), deadline_ms,
                                                         self._ttl_ms(expire_at, now)]))
        return ReplayClaim("claimed", owner) if state == "claimed" else ReplayClaim(state)

    async def answered(self, key: str, owner: str, expire_at: int) -> str:
        """One atomic script: pending(owner) → answered(owner). See `NonceStore.answered`.

        Raises DependencyUnavailable (the caller then releases and answers 503).
        """
        return _text(await self._run(self._answered, key, [owner, self._ttl_ms(expire_at, self._clock.now())]))

    async def release(self, key: str, owner: str) -> None:
        """Delete `owner`'s record; best effort: a failure is logged, the deadline frees it."""
        try:
            await self._run(self._release, key, [owner])
        except DependencyUnavailable:
            log.warning("replay claim not released; a retry is answered once its deadline passes",
                        extra={"pending_seconds": self.pending_seconds})

    async def ping(self) -> bool:
        """True when Redis answers PING within the timeout."""
        try:
            async with asyncio.timeout(self._timeout):
                return bool(await self.client.ping())
        except (RedisError, OSError, TimeoutError):
            return False

    async def close(self) -> None:
        await self.client.aclose()


def redis_problem(exc: BaseException) -> str:
    """The callback's Msg for a Redis failure (RedisError, OSError, TimeoutError), fail closed:
    a timeout (ours or redis-py's) says Redis did not answer in time; a refused or broken
    connection says it is unreachable; another Redis error says Redis refused the command."""
    if isinstance(exc, TimeoutError | RedisTimeoutError):  # before OSError: TimeoutError is one
        return "Redis did not answer in time; fail closed"
    if isinstance(exc, RedisConnectionError | OSError):
        return "Redis is unreachable; fail closed"
    return "Redis refused the command; fail closed"


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def make_store(
    redis_url: str | None, timeout: float, clock: Clock = SYSTEM_CLOCK
) -> MemoryNonceStore | RedisNonceStore:
    """The configured store: Redis when `redis_url` is set, else the in-process one."""
    if redis_url:
        return RedisNonceStore(redis_url, timeout, clock)
    return MemoryNonceStore(clock)
