"""Interfaces and shared shapes of the gateway, in one place.

Modules depend on these shapes rather than on each other: units, the clock, the
replay store and secrets.
"""

from __future__ import annotations

from typing import Protocol

SECONDS = 1
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
