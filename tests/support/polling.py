"""Wait for something another process or task does: ask again until it holds, up to a stated
bound, instead of sleeping a fixed time and asserting once (which fails on a loaded machine).

Rationale: docs/design-notes.md, "tests/support/polling.py".
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["LOADED_SLACK", "after_promise", "after_promise_async", "until", "until_async"]

T = TypeVar("T")

LOADED_SLACK = 30.0
"""Seconds a machine under a load of 8 on 2 cores may add to what the code promises."""


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


def eventually(ask: Callable[[], T], want: T, seconds: float = 60.0, every: float = 0.2) -> T:
    """ask() until it returns `want` or `seconds` pass (monotonic); the last answer, for the
    caller's assertion to show."""
    deadline = time.monotonic() + seconds
    got = ask()
    while got != want and time.monotonic() < deadline:
        time.sleep(every)
        got = ask()
    return got


def after_promise(answered_at: float, promised: float, check: Callable[[], T], *, what: str,
                  slack: float = LOADED_SLACK) -> T:
    """check() once `promised` seconds passed since `answered_at` (time.monotonic() when the
    promise was made, e.g. a document API answer's visibleWithinSeconds), asked again until it
    returns a truthy value for at most `slack` more seconds; that value. An assertion check()
    raises is not retried. Raises AssertionError naming `what` and the last answer."""
    time.sleep(max(0.0, answered_at + promised - time.monotonic()))
    return until(check, within=slack, what=what)


async def until_async(check: Callable[[], T | Awaitable[T]], *, within: float, every: float = 0.01,
                      what: str = "the check") -> T:
    """`until` for a test on the event loop: check() may be a coroutine; sleeps with asyncio
    between two checks, so the tasks it waits for run."""
    deadline = time.monotonic() + within
    while True:
        answer = check()
        got: T = await answer if inspect.isawaitable(answer) else answer
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not so within {within} s; last answer {got!r}")
        await asyncio.sleep(every)


async def after_promise_async(answered_at: float, promised: float, check: Callable[[], T | Awaitable[T]], *,
                              what: str, slack: float = LOADED_SLACK, every: float = 0.2) -> T:
    """`after_promise` for a test on the event loop; check() may be a coroutine."""
    await asyncio.sleep(max(0.0, answered_at + promised - time.monotonic()))
    return await until_async(check, within=slack, every=every, what=what)
