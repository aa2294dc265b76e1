"""Wait for something another process or task does: ask again until it holds, up to a stated
bound, instead of sleeping a fixed time and asserting once (which fails on a loaded machine).

    first = until(lambda: search("水果"), within=30, what="the new document is searchable")
    await until_async(lambda: log.count == 3, within=10, what="three writes")

The bound is how long a loaded machine may need, not a promise of the code under test: a check
that holds at once returns at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["until", "until_async"]

T = TypeVar("T")


def until(check: Callable[[], T], *, within: float, every: float = 0.05, what: str = "the check") -> T:
    """check() until it returns a truthy value, asked every `every` seconds for at most `within`
    seconds (monotonic); that value. Raises AssertionError naming `what` and check()'s last answer."""
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not so within {within} s; last answer {got!r}")
        time.sleep(every)


async def until_async(check: Callable[[], T], *, within: float, every: float = 0.01,
                      what: str = "the check") -> T:
    """`until` for a test on the event loop: sleeps with asyncio between two checks, so the
    tasks it waits for run."""
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not so within {within} s; last answer {got!r}")
        await asyncio.sleep(every)
