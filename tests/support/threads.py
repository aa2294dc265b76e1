"""Calls run from threads released together, for the tests of what happens at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` in threads released together (a barrier); each one's result or the exception
    it raised, in the order of `calls`."""
    gate = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        gate.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test looks at
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
