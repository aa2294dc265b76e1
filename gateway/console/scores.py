"""Scores shown with the precision the gap verdict uses.

Rationale: docs/design-notes.md, "gateway/console/scores.py".
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal, InvalidOperation

PLACES = 3


def cut(value: float, places: int = PLACES) -> float:
    """`value` rounded toward -inf to `places` decimals, read from its shortest repr (so 0.29
    stays 0.29, never 0.289999). A value that is not a finite number is 0.0."""
    try:
        d = Decimal(repr(float(value)))
        if not d.is_finite():
            return 0.0
        return float(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_FLOOR))
    except (InvalidOperation, ValueError, TypeError, OverflowError):
        return 0.0


def score_text(value: float, places: int = PLACES) -> str:
    """`value` as text with `places` decimals, cut as `cut` does: 0.2996 → '0.299'."""
    return f"{cut(value, places):.{places}f}"
