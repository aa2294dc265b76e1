"""The running asyncio loop's clock, held still and moved by the test: what the loop times
(asyncio.timeout, asyncio.sleep, call_later) happens when the test advances the clock, never
because the machine was slow.

Rationale: docs/design-notes.md, "tests/support/loop_clock.py".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["LoopClock", "held_loop_clock", "settle"]


@dataclass(slots=True)
class LoopClock:
    """The loop's time in seconds (the loop's own scale, monotonic), moved only by `advance`."""

    t: float

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@contextmanager
def held_loop_clock() -> Iterator[LoopClock]:
    """The running loop's `time()` replaced by a LoopClock starting at the loop's time now;
    restored on leaving. Call from a coroutine running on that loop."""
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop.time())
    loop.time = clock.now  # type: ignore[method-assign]
    try:
        yield clock
    finally:
        del loop.time  # the class's method again


async def settle(rounds: int = 50) -> None:
    """Give the loop `rounds` turns: the ready tasks (and timers due) run; no clock moves."""
    for _ in range(rounds):
        await asyncio.sleep(0)
