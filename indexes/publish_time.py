"""publish_time: unix seconds (UTC) that a `datetime` can hold, and how other values are read.

Rationale: docs/design-notes.md, "indexes/publish_time.py".
"""

from __future__ import annotations

import datetime as dt
import math

__all__ = ["EARLIEST", "LATEST", "MS_HIGH", "MS_LOW", "from_number", "rfc3339", "stored"]

EARLIEST = -62_135_596_800
"""0001-01-01T00:00:00Z in unix seconds: datetime.min in UTC."""
LATEST = 253_402_300_799
"""9999-12-31T23:59:59Z in unix seconds: datetime.max in UTC, whole seconds."""
MS_LOW = 10**12
"""The smallest value read as milliseconds: 2001-09-09T01:46:40Z."""
MS_HIGH = 10**13
"""The first value past the millisecond range (2286-11-20T17:46:40Z): 13 digits only."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def from_number(value: int | float, name: str = "publish_time") -> tuple[int, bool]:
    """A numeric publish_time → (unix seconds, whether it was read as milliseconds).

    value: int or float (a float is truncated toward zero, as `int()` does); name: the
    field's name in the message. Raises
    ValueError, saying why, when it is not finite or is neither seconds in EARLIEST..LATEST
    nor 13-digit milliseconds (see the module docstring).
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"'{name}' {value!r} is not a finite number")
    if EARLIEST <= value <= LATEST:
        return int(value), False
    if MS_LOW <= value < MS_HIGH:
        return int(value // 1000), True
    raise ValueError(f"'{name}' {_shown(value)} is outside the times kept "
                     "(unix seconds from 0001-01-01 to 9999-12-31, or 13-digit milliseconds)")


def stored(value: object) -> int | None:
    """A publish_time as read from an index → unix seconds in EARLIEST..LATEST, or None.

    Never raises: an index built before this rule may hold 13-digit milliseconds (read as
    `from_number` reads them at ingest) or any other 64-bit integer (left out: None).
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    try:
        return from_number(value)[0]
    except ValueError:
        return None


def rfc3339(value: object) -> str | None:
    """A publish_time (unix seconds, or a stored value as `stored` reads it) → RFC 3339 UTC
    text with a four-digit year ("2025-12-01T09:06:40Z"), or None when it is no time. Never raises."""
    seconds = stored(value)
    if seconds is None:
        return None
    moment = _EPOCH + dt.timedelta(seconds=seconds)  # fromtimestamp() fails before 1970 on some systems
    return moment.replace(tzinfo=None).isoformat() + "Z"  # whole seconds: no fraction; years always 4 digits


def _shown(value: int | float) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"
