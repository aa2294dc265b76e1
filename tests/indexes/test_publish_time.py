"""indexes/publish_time.py: the unit (unix seconds) and range (0001..9999) of publish_time, the
13-digit millisecond rule, and the reading of stored values that never raises."""

from __future__ import annotations

import datetime as dt

import pytest

from indexes.publish_time import EARLIEST, LATEST, MS_HIGH, MS_LOW, from_number, rfc3339, stored


def test_the_range_is_what_a_datetime_holds() -> None:
    assert dt.datetime.fromtimestamp(EARLIEST, dt.UTC) == dt.datetime.min.replace(tzinfo=dt.UTC)
    assert dt.datetime.fromtimestamp(LATEST, dt.UTC) == dt.datetime.max.replace(microsecond=0, tzinfo=dt.UTC)
    assert rfc3339(MS_LOW) == "2001-09-09T01:46:40Z" and rfc3339(MS_HIGH - 1) == "2286-11-20T17:46:39Z"
    assert MS_LOW > LATEST  # read as seconds, no 13-digit value is a time: nothing is ambiguous


@pytest.mark.parametrize(("value", "seconds", "as_ms"), [
    (0, 0, False), (1_764_580_000, 1_764_580_000, False), (1_764_580_000.9, 1_764_580_000, False),
    (-1, -1, False), (EARLIEST, EARLIEST, False), (LATEST, LATEST, False),
    (1_764_580_000_000, 1_764_580_000, True), (1_764_580_000_999, 1_764_580_000, True),
    (MS_LOW, 1_000_000_000, True), (MS_HIGH - 1, 9_999_999_999, True), (1.7645800005e12, 1_764_580_000, True),
])
def test_seconds_are_kept_and_13_digit_milliseconds_converted(value: float, seconds: int, as_ms: bool) -> None:
    assert from_number(value) == (seconds, as_ms)


@pytest.mark.parametrize("value", [
    EARLIEST - 1, LATEST + 1, MS_LOW - 1, MS_HIGH, 9_000_000_000_000_000_000, 10**20, -(10**15), 1.5e300,
    float("inf"), float("-inf"), float("nan"),
])
def test_anything_else_is_refused_naming_the_value(value: float) -> None:
    with pytest.raises(ValueError, match="'publish_time' .*(outside the times kept|not a finite number)"):
        from_number(value)


@pytest.mark.parametrize(("value", "seconds", "text"), [
    (1_700_000_000, 1_700_000_000, "2023-11-14T22:13:20Z"),
    (1_764_580_000_000, 1_764_580_000, "2025-12-01T09:06:40Z"),  # an index built before the rule
    (EARLIEST, EARLIEST, "0001-01-01T00:00:00Z"), (LATEST, LATEST, "9999-12-31T23:59:59Z"),
    (-86_400, -86_400, "1969-12-31T00:00:00Z"),
    (9_000_000_000_000_000_000, None, None), (2**63 - 1, None, None), (-(2**63), None, None),
    (LATEST + 1, None, None), (None, None, None), (True, None, None), ("1700000000", None, None), (1.5, None, None),
])
def test_a_stored_value_is_read_without_raising(value: object, seconds: int | None, text: str | None) -> None:
    assert stored(value) == seconds
    assert rfc3339(value) == text
