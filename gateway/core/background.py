"""A background writer: work is queued without I/O on the request path and written by one
task of the worker's event loop, in batches, after the response has left.

Rationale: docs/design-notes.md, "gateway/core/background.py".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

BOOKKEEPING_LINGER = 0.05
"""Seconds a bookkeeping writer (deliveries, key usage) gathers work before a write (`linger`)."""


class BackgroundWriter:
    """Runs `write_pending()` whenever `poke()` is called, until `has_pending()` is False.

    has_pending: () -> bool, cheap. write_pending: takes one batch off the owner's queue and
    writes it; it must not raise (fail open is the owner's policy). name: the task's name.
    """

    def __init__(self, name: str, has_pending: Callable[[], bool],
                 write_pending: Callable[[], Awaitable[None]], linger: float = 0.0) -> None:
        self._name = name
        self._linger = linger
        self._hurry: asyncio.Event | None = None
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
            self._wake, self._idle, self._hurry = asyncio.Event(), asyncio.Event(), asyncio.Event()
            self._task = loop.create_task(self._run(), name=self._name)
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None and self._hurry is not None
        while True:
            if not self._has_pending():
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._linger > 0 and not self._hurry.is_set():
                try:  # gather what the next requests add, unless someone waits for it
                    async with asyncio.timeout(self._linger):
                        await self._hurry.wait()
                except TimeoutError:
                    pass
            await self._write_pending()

    async def flush(self, timeout: float = 2.0) -> None:
        """Wait (at most `timeout` seconds) until everything queued has been written."""
        if self._idle is None or self._task is None or self._task.done():
            return
        assert self._hurry is not None
        self._hurry.set()
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            pass
        finally:
            self._hurry.clear()

    async def close(self, timeout: float = 2.0) -> None:
        """Flush, then stop the task."""
        await self.flush(timeout)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
