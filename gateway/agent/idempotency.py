"""Idempotency and dedupe records of the write-controlled tools, in Redis (Agent Access API 技术设计 §10).

Rationale: docs/design-notes.md, "gateway/agent/idempotency.py".
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any, Literal, get_args

import orjson
from redis.exceptions import RedisError

from gateway.core.errors import ToolError
from gateway.core.redis_clients import AsyncRedis
from gateway.core.types import SECONDS

IDEMPOTENCY_TTL = 24 * 3600 * SECONDS
DEDUPE_TTL = 7 * 24 * 3600 * SECONDS
PENDING_TTL = 30 * SECONDS
ACCESS_TAG = "{access}"  # the Redis Cluster hash tag of every record here (module docstring)

Outcome = Literal["new", "replay", "deduped", "conflict", "pending"]

_SPACES = re.compile(r"\s+")

_BEGIN = """
local has_idem = ARGV[5] == '1'
if has_idem then
  local h = redis.call('HGET', KEYS[1], 'h')
  if h then
    if h ~= ARGV[1] then return {'conflict', '', 0, ''} end
    local res = redis.call('HGET', KEYS[1], 'result')
    if res then
      return {'replay', res, tonumber(redis.call('HGET', KEYS[1], 'count')), redis.call('HGET', KEYS[1], 'outcome')}
    end
    return {'pending', '', 0, ''}
  end
end
local state = redis.call('HGET', KEYS[2], 'state')
if state == 'done' then
  local n = redis.call('HINCRBY', KEYS[2], 'count', 1)
  local res = redis.call('HGET', KEYS[2], 'result')
  if has_idem then
    redis.call('HSET', KEYS[1], 'h', ARGV[1], 'result', res, 'count', n, 'outcome', 'deduped')
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return {'deduped', res, n, 'deduped'}
end
if state then return {'pending', '', 0, ''} end
redis.call('HSET', KEYS[2], 'state', 'pending', 'owner', ARGV[2], 'count', 1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if has_idem then
  redis.call('HSET', KEYS[1], 'h', ARGV[1], 'owner', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return {'new', '', 1, ''}
"""

_FINISH = """
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'state', 'done', 'result', ARGV[2], 'count', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if ARGV[5] == '1' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'result', ARGV[2], 'count', ARGV[7], 'outcome', ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"""

_ABANDON = """
if redis.call('HGET', KEYS[2], 'owner') == ARGV[1] and redis.call('HGET', KEYS[2], 'state') == 'pending' then
  redis.call('DEL', KEYS[2])
end
if ARGV[2] == '1' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and not redis.call('HGET', KEYS[1], 'result') then
  redis.call('DEL', KEYS[1])
end
return 1
"""


def _outcome(word: str) -> Outcome:
    """The script's first answer as an Outcome (it answers nothing else)."""
    for known in get_args(Outcome):
        if word == known:
            return known  # type: ignore[no-any-return]
    raise ToolError("access.tool_failed", "the idempotency store answered outside its contract", retryable=True)


def canonical_hash(value: Any) -> str:
    """SHA-256 hex of `value` as canonical JSON (keys sorted, compact, UTF-8).

    value: any JSON-able object. Used for the idempotency payload hash.
    """
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _canon(value: Any) -> Any:
    if isinstance(value, str):
        return _SPACES.sub(" ", unicodedata.normalize("NFKC", value)).strip().casefold()
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


CANONICAL_PREFIX = "sha256:"


def canonical_dedupe_key(tool: str, payload: dict[str, Any]) -> str:
    """The recommended dedupeKey of a write tool's input: 'sha256:' + 64 hex digits.

    tool: 'create_feedback' | 'create_improvement_task'. payload: the FeedbackRequest or
    ImprovementTaskRequest. Strings are NFKC-normalized, whitespace-collapsed and
    case-folded, keys sorted; the caller id is never part of it (Agent Access API 技术设计 §10), so the
    same feedback from two agents dedupes. Clients may send a key of their own instead
    (module docstring: what happens when such keys collide).
    """
    return CANONICAL_PREFIX + canonical_hash({"tool": tool, "payload": _canon(payload)})


def idempotency_redis_key(prefix: str, caller_id: str, tool: str, key: str) -> str:
    """'{prefix}:{access}:idem:{sha256 hex of caller id, tool, key}' (the key includes the
    caller; `{access}` is the hash tag both keys of a call share, module docstring)."""
    digest = hashlib.sha256("\x00".join((caller_id, tool, key)).encode()).hexdigest()
    return f"{prefix}:{ACCESS_TAG}:idem:{digest}"


def dedupe_redis_key(prefix: str, tool: str, dedupe_key: str) -> str:
    """'{prefix}:{access}:dedupe:{tool}:{sha256 hex of the dedupe key}' (no caller; the same
    hash tag as `idempotency_redis_key`)."""
    return f"{prefix}:{ACCESS_TAG}:dedupe:{tool}:{hashlib.sha256(dedupe_key.encode()).hexdigest()}"


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer of `IdempotencyStore.begin`.

    outcome: 'new' — this call owns a pending record and must write, then `finish` or
    `abandon`; 'replay' — same idempotencyKey and payload: `result` is the stored result
    and `replayed_outcome` says whether it was 'created' or 'deduped'; 'deduped' — an equal
    record exists: `result` is it, `count` the raised count; 'conflict' — same
    idempotencyKey, different payload; 'pending' — another call is writing right now.
    result: the stored public record (JSON bytes) or None. owner: token for finish/abandon.
    """

    outcome: Outcome
    result: bytes | None
    count: int
    owner: str
    idem_key: str | None
    dedupe_key: str
    replayed_outcome: str = ""


class IdempotencyStore:
    """Idempotency + dedupe records in Redis (see module doc for keys and retention).

    client: an asyncio Redis client (not closed here). prefix: the configured key prefix.
    ttls in seconds. timeout: seconds per Redis call; a slow or down Redis raises
    ToolError('access.tool_failed', retryable) — writes fail closed, never unguarded.
    """

    def __init__(self, client: AsyncRedis, prefix: str, *, idempotency_ttl: int = IDEMPOTENCY_TTL,
                 dedupe_ttl: int = DEDUPE_TTL, pending_ttl: int = PENDING_TTL, timeout: float = 1.0) -> None:
        self._r = client
        self._prefix = prefix
        self.idempotency_ttl = idempotency_ttl
        self.dedupe_ttl = dedupe_ttl
        self.pending_ttl = pending_ttl
        self._timeout = timeout
        self._begin = client.register_script(_BEGIN)
        self._finish = client.register_script(_FINISH)
        self._abandon = client.register_script(_ABANDON)

    async def _run(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                return await script(keys=keys, args=args)
        except (RedisError, OSError, TimeoutError):
            raise ToolError("access.tool_failed", "the idempotency store is unavailable", retryable=True) from None

    async def begin(self, *, tool: str, caller_id: str, idempotency_key: str | None, dedupe_key: str,
                    payload_hash: str) -> Claim:
        """Decide atomically what this write call is (see `Claim`).

        tool: the write tool name; caller_id: the authenticated client id (from the token);
        idempotency_key: as sent, or None; dedupe_key: as sent (required upstream);
        payload_hash: `canonical_hash` of everything that defines the write (tool, scope,
        input, dedupeKey) — never the requestId. Raises ToolError('access.tool_failed').
        """
        idem = idempotency_redis_key(self._prefix, caller_id, tool, idempotency_key) if idempotency_key else None
        ded = dedupe_redis_key(self._prefix, tool, dedupe_key)
        owner = uuid.uuid4().hex
        out = await self._run(self._begin, [idem or ded, ded], [
            payload_hash, owner, self.idempotency_ttl * 1000, self.pending_ttl * 1000, "1" if idem else "0"])
        outcome = _outcome(out[0].decode() if isinstance(out[0], bytes) else str(out[0]))
        result = out[1] or None
        replayed = out[3].decode() if isinstance(out[3], bytes) else out[3]
        return Claim(outcome, result, int(out[2] or 0), owner, idem, ded, replayed)

    async def finish(self, claim: Claim, result: bytes, *, outcome: str = "created", count: int = 1) -> bool:
        """Store the result of the write `claim` owned: the dedupe record becomes 'done'
        (kept DEDUPE_TTL) and the idempotency record gets the result (kept IDEMPOTENCY_TTL).

        result: the public record as JSON bytes. outcome: 'created' | 'deduped' (the tracker
        already had it). count: the record's count. Returns False when the claim was lost
        (its pending record expired and another call took over).
        """
        done = await self._run(self._finish, [claim.idem_key or claim.dedupe_key, claim.dedupe_key], [
            claim.owner, result, self.idempotency_ttl * 1000, self.dedupe_ttl * 1000,
            "1" if claim.idem_key else "0", outcome, count])
        return bool(done)

    async def abandon(self, claim: Claim) -> None:
        """Drop the pending records of a failed write so a retry may try again."""
        await self._run(self._abandon, [claim.idem_key or claim.dedupe_key, claim.dedupe_key],
                        [claim.owner, "1" if claim.idem_key else "0"])

    async def settle(self, *, tool: str, caller_id: str, idempotency_key: str | None, dedupe_key: str,
                     payload_hash: str, wait: float = 5.0, poll: float = 0.05) -> Claim:
        """`begin`, waiting while another call holds the record pending.

        wait: seconds to wait at most (then ToolError('access.tool_failed', retryable)).
        poll: seconds between attempts. Never returns 'pending'.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            claim = await self.begin(tool=tool, caller_id=caller_id, idempotency_key=idempotency_key,
                                     dedupe_key=dedupe_key, payload_hash=payload_hash)
            if claim.outcome != "pending":
                return claim
            if loop.time() >= deadline:
                raise ToolError("access.tool_failed", "an equal write is still in progress; retry later",
                                retryable=True, retry_after=1.0)
            await asyncio.sleep(poll)
