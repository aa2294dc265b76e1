"""The observers' write-behind: what a callback hands over waits in a bounded queue and is written
in one batch every `gaps.flush_seconds`, off the answer's path; a failed write is said at most
every WARN_EVERY seconds."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from gateway.core.config import Config

T = TypeVar("T")
WARN_EVERY = 10.0
"""Seconds between two warnings of the same loop."""


class FlushLoop(Generic[T]):
    """config: () -> the current Config; now: the clock (unix s); log: where warnings go;
    max_pending: items queued at most between two flushes (a flush that falls behind drops the
    newest). A subclass queues with `_queue` and writes what `_take` gives in its `flush`."""

    def __init__(self, config: Callable[[], Config], now: Callable[[], float], log: logging.Logger,
                 max_pending: int) -> None:
        self._config = config
        self._now = now
        self._log = log
        self._max_pending = max_pending
        self._pending: deque[T] = deque()
        self._last_warning = 0.0

    def _queue(self, item: T) -> bool:
        """Queue `item`; False (nothing queued) when max_pending wait already."""
        if len(self._pending) >= self._max_pending:
            return False
        self._pending.append(item)
        return True

    def _take(self) -> list[T]:
        """Everything queued so far, oldest first; the queue is left empty."""
        return [self._pending.popleft() for _ in range(len(self._pending))]

    async def run(self) -> None:
        """Flush every gaps.flush_seconds until cancelled."""
        while True:
            await asyncio.sleep(self._config().gaps.flush_seconds)
            await self.flush()

    async def flush(self) -> None:
        """Write what is queued (one batch). Never raises."""
        raise NotImplementedError

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY:
            self._log.warning(message)
            self._last_warning = now
