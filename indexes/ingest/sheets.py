"""Excel reader (.xlsx, openpyxl in read-only mode, cached values instead of formulas).

Rationale: docs/design-notes.md, "indexes/ingest/sheets.py".
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..types import Document, IngestError, IngestWarning, Section
from .office import office_problem, too_much_text

__all__ = ["read_xlsx"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


def _lines(rows: Iterator[Sequence[Any]]) -> Iterator[str]:
    """One line per non-empty row (module docstring); "" for an empty one, so the caller counts it."""
    header: list[str] | None = None
    first = True
    for row in rows:
        cells = [_cell(v) for v in row]
        if not any(cells):
            yield ""
            continue
        if first:
            first = False
            filled = [(v, c) for v, c in zip(row, cells, strict=True) if c]
            if len(filled) >= 2 and all(isinstance(v, str) for v, _ in filled):
                header = cells
                yield " | ".join(c for c in cells if c)
                continue
        if header is not None:
            pairs = [f"{header[i]}: {c}" if i < len(header) and header[i] else c for i, c in enumerate(cells) if c]
            yield "; ".join(pairs)
        else:
            yield " | ".join(c for c in cells if c)


def read_xlsx(data: bytes, rel_path: str, limit: int) -> Iterator[Document | IngestError | IngestWarning]:
    """One Document for a .xlsx file (module docstring), or one IngestError. limit: the most
    bytes of text (UTF-8, a line's end 1, an empty row 1) read before the file is refused as too large."""
    problem = office_problem(data, rel_path, "Excel", limit)
    if problem is not None:
        yield problem
        return
    import openpyxl

    sections: list[Section] = []
    size = 0
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            for sheet in book.worksheets:
                lines: list[str] = []
                if hasattr(sheet, "reset_dimensions"):  # a chart sheet has none (and no rows)
                    sheet.reset_dimensions()  # else rows past an understated <dimension> are never read
                for line in _lines(sheet.iter_rows(values_only=True)):
                    size += len(line.encode("utf-8")) + 1
                    if size > limit:
                        yield too_much_text(rel_path, size, limit, "xlsx")
                        return
                    if line:
                        lines.append(line)
                if lines:
                    sections.append(Section(" ".join(str(sheet.title).split()), "\n".join(lines)))
            title = (book.properties.title or "").strip()
        finally:
            book.close()
    except Exception as exc:
        yield IngestError(rel_path, f"corrupt Excel file: {type(exc).__name__}: {str(exc)[:160]}", kind="corrupt")
        return
    yield Document(id=rel_path, title=title or Path(rel_path).stem, sections=tuple(sections), path=rel_path)
