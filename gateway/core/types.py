"""Interfaces and shared shapes of the gateway, in one place.

Modules depend on these shapes rather than on each other: units, the clock, the
replay store and secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from indexes.types.secret import Secret as Secret  # the one secret holder, re-exported for the gateway

SECONDS = 1
KIB = 1024
MIB = 1024 * KIB


class Clock(Protocol):
    """Anything with `now() -> float` (unix seconds)."""

    def now(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ReplayClaim:
    """What `NonceStore.claim` found. state: 'claimed' (this request owns the pending record:
    `owner` is its token), 'answered' (a 200 went out for this delivery) or 'pending'
    (another request is answering it now and its deadline has not passed)."""

    state: str
    owner: str = ""


class NonceStore(Protocol):
    """Each delivery answered at most once; a failed one answerable again (gateway.core.replay
    describes the state machine; memory and Redis implement it).

    claim(key, expire_at) -> ReplayClaim. expire_at: unix seconds (int) after which the
        record may vanish (the end of the tolerance window).
    answered(key, owner, expire_at) -> 'recorded' (the owner's 200 may leave), 'answered'
        (another request's 200 went out) or 'pending' (another request took the claim over).
    release(key, owner): drop the owner's record after any answer but a 200; never raises.
    claim and answered raise `DependencyUnavailable` when the store cannot answer in time.
    """

    async def claim(self, key: str, expire_at: int) -> ReplayClaim: ...

    async def answered(self, key: str, owner: str, expire_at: int) -> str: ...

    async def release(self, key: str, owner: str) -> None: ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...

    @property
    def shared(self) -> bool:
        """True when several processes see the same claims (Redis)."""
        ...
