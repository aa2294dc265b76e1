"""indexes/dense/query.py: the circuit breaker's state machine (the deadline and the breaker
against a real HTTP server are in test_providers.py)."""

from __future__ import annotations

from indexes.dense.query import Breaker


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_breaker_opens_after_consecutive_failures_then_half_opens_one_trial() -> None:
    clock = Clock()
    b = Breaker(failures=3, reset_seconds=10.0, clock=clock)
    for _ in range(2):
        assert b.allow()
        b.failure()
    b.success()  # a success in between resets the count
    for _ in range(3):
        assert b.allow()
        b.failure()
    assert b.state == "open" and not b.allow()
    clock.t = 9.9
    assert not b.allow()
    clock.t = 10.0
    assert b.state == "half-open"
    assert b.allow() and not b.allow()  # one trial at a time
    b.failure()  # the trial failed: open again, for a full period
    assert b.state == "open"
    clock.t = 20.0
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow()
