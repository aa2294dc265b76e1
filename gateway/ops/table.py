"""Plain-text tables for the operator's terminal (`kbgate secrets list`), aligned by display width.

A cell's width is what a terminal shows: East Asian wide and fullwidth characters (Unicode
UAX #11, categories W and F: 中文, ＡＢ) take two columns, combining marks none, others one,
so a column stays straight whatever the names hold.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence


def display_width(text: str) -> int:
    """Terminal columns `text` takes (UAX #11: W and F count 2, combining marks 0, others 1)."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: frozenset[int] = frozenset(),
          gap: str = "  ") -> list[str]:
    """`header` and `rows` as lines, each column as wide as its widest cell; columns whose index
    is in `right` are right-aligned. The last column is not padded (no trailing blanks)."""
    widths = [max(display_width(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for r in (header, *rows):
        cells = []
        for i, cell in enumerate(r):
            pad = " " * (widths[i] - display_width(cell)) if i < len(r) - 1 or i in right else ""
            cells.append(pad + cell if i in right else cell + pad)
        lines.append(gap.join(cells).rstrip())
    return lines
