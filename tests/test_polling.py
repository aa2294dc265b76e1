"""tests/support/polling.py and tests/support/loop_clock.py: the waits the suite uses instead of
fixed sleeps and wall-clock bounds."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.loop_clock import held_loop_clock, settle
from tests.support.polling import after_promise, until, until_async


def test_until_returns_the_first_truthy_answer_and_names_what_never_held() -> None:
    answers = iter([0, [], "ready", "later"])
    assert until(lambda: next(answers), within=5, every=0.001) == "ready"
    with pytest.raises(AssertionError, match=r"the index is searchable: not so within 0.05 s; last answer \[\]"):
        until(lambda: [], within=0.05, every=0.01, what="the index is searchable")


def test_after_promise_asks_only_once_the_promised_time_passed() -> None:
    asked: list[float] = []
    answered = time.monotonic()
    after_promise(answered, 0.2, lambda: asked.append(time.monotonic()) or True, what="visible")
    assert len(asked) == 1 and asked[0] >= answered + 0.2


@pytest.mark.anyio
async def test_until_async_awaits_a_coroutine_check() -> None:
    calls: list[int] = []

    async def check() -> int:
        calls.append(1)
        return len(calls) >= 3

    assert await until_async(check, within=5, every=0.001) is True and len(calls) == 3


@pytest.mark.anyio
async def test_a_held_loop_clock_fires_timers_only_when_advanced() -> None:
    with held_loop_clock() as clock:
        sleeper = asyncio.ensure_future(asyncio.sleep(10.0))
        await settle()
        clock.advance(9.999)
        await settle()
        assert not sleeper.done()  # 9.999 s of the loop's time: not yet
        clock.advance(0.002)
        await settle()
        assert sleeper.done()
    loop = asyncio.get_running_loop()
    assert "time" not in vars(loop)  # the loop's own clock again
