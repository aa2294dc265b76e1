"""gateway.core.background: bookkeeping written in batches after the answers, never on their path."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.background import BackgroundWriter
from tests.support.loop_clock import held_loop_clock, settle

pytestmark = pytest.mark.anyio


class Recorder:
    """A queue of items and the batches a BackgroundWriter wrote from it."""

    def __init__(self, linger: float) -> None:
        self.queue: list[int] = []
        self.batches: list[list[int]] = []
        self.writer = BackgroundWriter("test", lambda: bool(self.queue), self.write, linger=linger)

    async def write(self) -> None:
        batch, self.queue = self.queue, []
        self.batches.append(batch)

    def add(self, item: int) -> None:
        self.queue.append(item)
        self.writer.poke()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_lingering_writer_gathers_the_work_of_many_requests_into_one_write() -> None:
    with held_loop_clock() as clock:  # the linger runs on the loop's clock: the test moves it
        r = Recorder(linger=0.05)
        for i in range(3):
            r.add(i)
            await settle()  # the writer is up and lingering; the next request comes 10 ms later
            clock.advance(0.01)
        clock.advance(0.019)  # 49 ms after the first request: still lingering
        await settle()
        assert r.batches == []
        clock.advance(0.002)  # 51 ms: the linger is over, one write for the three
        await settle()
        assert r.batches == [[0, 1, 2]]
        await r.writer.close()


async def test_without_linger_each_wake_up_writes_what_is_queued() -> None:
    with held_loop_clock():  # no time passes: each write follows its wake-up alone
        r = Recorder(linger=0.0)
        r.add(1)
        await settle()
        r.add(2)
        await settle()
        assert r.batches == [[1], [2]]
        await r.writer.close()


async def test_flush_writes_at_once_whatever_the_linger() -> None:
    with held_loop_clock() as clock:  # the 30 s linger never elapses unless the test says so
        r = Recorder(linger=30.0)
        r.add(1)
        flushing = asyncio.ensure_future(r.writer.flush(timeout=5.0))
        await settle()
        assert flushing.done() and r.batches == [[1]]
        r.add(2)  # after a flush the writer lingers again
        await settle()
        clock.advance(29.9)
        await settle()
        assert r.batches == [[1]]
        closing = asyncio.ensure_future(r.writer.close(timeout=5.0))  # close flushes at once
        await settle()
        assert closing.done() and r.batches == [[1], [2]]
