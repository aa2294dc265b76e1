"""Interfaces and shared shapes of the gateway, in one place.

Modules depend on these shapes rather than on each other: the replay store,
the clock, secrets and the parsed callback request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

SECONDS = 1
MINUTES = 60 * SECONDS
KIB = 1024
MIB = 1024 * KIB


class Clock(Protocol):
    """Anything with `now() -> float` (unix seconds)."""

    def now(self) -> float: ...


class NonceStore(Protocol):
    """Claims a nonce once. Implemented in `gateway.core.replay` (memory and Redis).

    claim(key, expire_at) -> True when this call claimed it first, False when it was
    already claimed. expire_at: unix seconds (int) after which the claim may vanish.
    Raises `DependencyUnavailable` when the backing store cannot answer in time.
    """

    async def claim(self, key: str, expire_at: int) -> bool: ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...

    @property
    def shared(self) -> bool:
        """True when several processes see the same claims (Redis)."""
        ...


class Secret:
    """A secret string whose repr/str never shows the value (starlette's habit).

    value: the raw secret (str). Use `.reveal()` only where the HMAC key is needed.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class CallbackRequest:
    """A parsed Volcengine knowledge query (seed 003, "Body").

    first_level_id, second_level_id: the knowledge path as configured in the console
        (a JSON number is taken as its decimal string).
    query: non-empty, at most `search.max_query_chars` characters.
    limit: 1..`search.max_limit` after clamping.
    """

    first_level_id: str
    second_level_id: str
    query: str
    limit: int
