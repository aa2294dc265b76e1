"""gateway.core.background: bookkeeping written in batches after the answers, never on their path."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.core.background import BackgroundWriter

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
    r = Recorder(linger=0.05)
    for i in range(3):
        r.add(i)
        await asyncio.sleep(0.005)  # three requests answered while the writer lingers
    assert r.batches == []
    await asyncio.sleep(0.1)
    assert r.batches == [[0, 1, 2]]
    await r.writer.close()


async def test_without_linger_each_wake_up_writes_what_is_queued() -> None:
    r = Recorder(linger=0.0)
    r.add(1)
    await asyncio.sleep(0.01)
    r.add(2)
    await asyncio.sleep(0.01)
    assert r.batches == [[1], [2]]
    await r.writer.close()


async def test_flush_writes_at_once_whatever_the_linger() -> None:
    r = Recorder(linger=30.0)
    r.add(1)
    started = time.monotonic()
    await r.writer.flush(timeout=5.0)
    assert r.batches == [[1]] and time.monotonic() - started < 1.0
    r.add(2)  # after a flush the writer lingers again
    await asyncio.sleep(0.05)
    assert r.batches == [[1]]
    await r.writer.close(timeout=5.0)
    assert r.batches == [[1], [2]]
