"""What the owners did with a gap group: filed (an improvement task), resolved, ignored; and the
rule that reopens a resolved group asked again.

Rationale: docs/design-notes.md, "gateway/console/gaps/states.py".
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import orjson
from redis.exceptions import RedisError

from gateway.core.errors import DependencyUnavailable
from gateway.core.redis_clients import async_client

MAX_STATES = 10_000
MARKS = ("resolved", "ignored", "open")  # what an owner may set by hand; 'filed' comes from a filing
TASK_STATES = ("open", "doing", "done")
DAY = 86400


@dataclass(frozen=True, slots=True)
class GroupState:
    """One group's state (module doc for the fields). task: the filed task's own state (open →
    doing → done; '' before a filing); assignee: a console user's name ('' none); document: the
    id of the document changed to close it, in `index` ('' none)."""

    state: str = "open"
    index: str = ""
    record: str = ""
    filed: int = 0
    filed_at: float = 0.0
    filed_by: str = ""
    at: float = 0.0
    by: str = ""
    task: str = ""
    assignee: str = ""
    document: str = ""

    @staticmethod
    def of(raw: Any) -> GroupState | None:
        """A state read back (JSON bytes or text), None when it does not parse."""
        try:
            data = orjson.loads(raw)
            return GroupState(**{k: data[k] for k in GroupState.__dataclass_fields__ if k in data})
        except (orjson.JSONDecodeError, TypeError):
            return None


def version(state: GroupState) -> str:
    """The version a task form carries (`base`): 16 hex of the SHA-256 of the whole state, so
    any change since the form was drawn (task, assignee, document, a refiling) shows."""
    return hashlib.sha256(orjson.dumps(asdict(state), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def state_key(group: str, index: str) -> str:
    """The key of `group`'s state for `index` (module doc); '' index: the group's id alone."""
    return f"{group}@{index}" if index else group


def group_of(key: str) -> str:
    """The group id of a state key."""
    return key.split("@", 1)[0]


def state_of(states: dict[str, GroupState], group: str, index: str) -> GroupState | None:
    """`group`'s state for `index`: its own, else one written for the whole group (no index)."""
    return states.get(state_key(group, index)) or states.get(group)


def status(state: GroupState | None, last_asked: float) -> str:
    """The group's status (module doc): `last_asked` is its newest question's time (unix s)."""
    if state is None or state.state == "open":
        return "open"
    if state.state == "resolved" and last_asked > state.at:
        return "reopened"
    return state.state


def filed(state: GroupState | None, *, index: str, record: str, who: str, now: float) -> GroupState:
    """The state after a filing by `who` at `now` (record: the tracker's id)."""
    s = state or GroupState()
    return replace(s, state="filed", index=index or s.index, record=record or s.record, filed=s.filed + 1,
                   filed_at=now, filed_by=who, at=now, by=who, task="open" if s.task in ("", "done") else s.task)


def tasked(state: GroupState, task: str, *, assignee: str, document: str, who: str, now: float) -> GroupState:
    """The state after `who` moves a filed group's task to `task` (one of TASK_STATES) at `now`,
    assigned to `assignee` ('' nobody), closed by `document` ('' none). Done resolves the group
    (a question asked after reopens it); open or doing files it again. Raises ValueError for
    another task state or a group never filed."""
    if task not in TASK_STATES:
        raise ValueError(f"a task is one of {', '.join(TASK_STATES)}")
    if not state.record:
        raise ValueError("the group has no filed task")
    group_state = "resolved" if task == "done" else "filed"
    return replace(state, state=group_state, task=task, assignee=assignee, document=document, at=now, by=who)


def marked(state: GroupState | None, mark: str, *, index: str, who: str, now: float) -> GroupState:
    """The state after `who` marks the group `mark` (one of MARKS) at `now`. Raises ValueError
    for another mark. 'open' undoes a resolved or ignored mark (a filed group stays filed)."""
    if mark not in MARKS:
        raise ValueError(f"a group is marked one of {', '.join(MARKS)}")
    s = state or GroupState()
    if mark == "open":
        mark = "filed" if s.record else "open"
    return replace(s, state=mark, index=index or s.index, at=now, by=who)


def _prune(states: dict[str, GroupState], live: set[str], now: float, keep_days: int) -> dict[str, GroupState]:
    horizon = now - keep_days * DAY
    kept = {k: s for k, s in states.items() if group_of(k) in live or s.at >= horizon}
    if len(kept) > MAX_STATES:
        kept = dict(sorted(kept.items(), key=lambda kv: -kv[1].at)[:MAX_STATES])
    return kept


class StateStore(Protocol):
    async def all(self) -> dict[str, GroupState]: ...

    async def put(self, key: str, state: GroupState, live: set[str], now: float, keep_days: int) -> None:
        """Keep `state` under `key` (`state_key`); live: the ids of the groups that exist now."""


class MemoryStates:
    """This process's states (no replay.redis_url)."""

    def __init__(self) -> None:
        self._s: dict[str, GroupState] = {}

    async def all(self) -> dict[str, GroupState]:
        return dict(self._s)

    async def put(self, key: str, state: GroupState, live: set[str], now: float, keep_days: int) -> None:
        self._s[key] = state
        self._s = _prune(self._s, live | {group_of(key)}, now, keep_days)


class RedisStates:
    """The states in Redis (module doc). Raises DependencyUnavailable('replay_store_unavailable')."""

    def __init__(self, url: str, prefix: str, timeout: float = 1.0) -> None:
        self._key = f"{prefix}:gaps:s"
        self._timeout = timeout
        self.client = async_client(url, timeout)

    async def all(self) -> dict[str, GroupState]:
        try:
            async with asyncio.timeout(self._timeout * 3):
                raw = await self.client.hgetall(self._key)
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the gap states are unavailable") from None
        out = {}
        for k, v in raw.items():
            s = GroupState.of(v)
            if s is not None:
                out[k.decode() if isinstance(k, bytes) else str(k)] = s
        return out

    async def put(self, key: str, state: GroupState, live: set[str], now: float, keep_days: int) -> None:
        states = await self.all()
        states[key] = state
        gone = set(states) - set(_prune(states, live | {group_of(key)}, now, keep_days))
        try:
            async with asyncio.timeout(self._timeout * 3):
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(self._key, key, orjson.dumps(asdict(state)))
                if gone:
                    pipe.hdel(self._key, *gone)
                await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            raise DependencyUnavailable("replay_store_unavailable", "the gap states are unavailable") from None

    async def close(self) -> None:
        await self.client.aclose()


def make_states(redis_url: str | None, prefix: str, timeout: float) -> MemoryStates | RedisStates:
    """Redis when replay.redis_url is set, else this process's memory."""
    return RedisStates(redis_url, prefix, timeout) if redis_url else MemoryStates()
