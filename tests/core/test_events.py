"""gateway/core/events.py: observers subscribe by type; one that fails never stops the others."""

from __future__ import annotations

import logging

import pytest

from gateway.core.events import Delivery, Events


def test_observers_get_their_type_in_order_and_a_failing_one_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    events = Events()
    seen: list[str] = []

    def broken(d: Delivery) -> None:
        raise RuntimeError("observer bug")

    events.subscribe(Delivery, lambda d: seen.append(f"first {d.request_id}"))
    events.subscribe(Delivery, broken)
    events.subscribe(Delivery, lambda d: seen.append(f"last {d.request_id}"))
    events.subscribe(str, lambda s: seen.append(f"str {s}"))
    with caplog.at_level(logging.WARNING, logger="kbgate.events"):
        events.publish(Delivery(request_id="r1", tenant="acme", received_at=0.0))
    assert seen == ["first r1", "last r1"]
    assert [r.getMessage() for r in caplog.records] == ["event observer failed"]
    events.publish(1)  # nobody listens: nothing happens
    events.publish("s")
    assert seen[-1] == "str s"
