"""A background writer: work is queued without I/O on the request path and written by one
task of the worker's event loop, in batches, after the response has left.

Used for records that are bookkeeping (deliveries, key usage): the owner keeps the queue
and knows how to write a batch; this module owns the task, its wake-up and its shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class BackgroundWriter:
    """Runs `write_pending()` whenever `poke()` is called, until `has_pending()` is False.

    has_pending: () -> bool, cheap. write_pending: takes one batch off the owner's queue and
    writes it; it must not raise (fail open is the owner's policy). name: the task's name.
    """

    def __init__(self, name: str, has_pending: Callable[[], bool],
                 write_pending: Callable[[], Awaitable[None]]) -> None:
        self._name = name
        self._has_pending = has_pending
        self._write_pending = write_pending
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None

    def poke(self) -> None:
        """New work was queued: start the task if needed and wake it. Outside a running
        event loop (a sync caller) the work simply waits for the next poke."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._task is None or self._task.done():
            self._wake, self._idle = asyncio.Event(), asyncio.Event()
            self._task = loop.create_task(self._run(), name=self._name)
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None
        while True:
            if not self._has_pending():
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._write_pending()

    async def flush(self, timeout: float = 2.0) -> None:
        """Wait (at most `timeout` seconds) until everything queued has been written."""
        if self._idle is None or self._task is None or self._task.done():
            return
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            pass

    async def close(self, timeout: float = 2.0) -> None:
        """Flush, then stop the task."""
        await self.flush(timeout)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
