"""The one clock seam: security code asks `clock.now()`, tests inject a fixed clock."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.core.types import Clock


class SystemClock:
    """Wall-clock time: `now()` returns unix seconds as a float."""

    def now(self) -> float:
        return time.time()


@dataclass(slots=True)
class FixedClock:
    """A settable clock for tests: `now()` returns `t` (unix seconds) until changed."""

    t: float

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


SYSTEM_CLOCK: Clock = SystemClock()
