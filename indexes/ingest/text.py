"""Plain-text reader: the first non-empty line is the title, the rest one section.

Document id and path are the path relative to the ingested folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..types import Document, IngestError, Section

__all__ = ["parse_text", "read_text"]


def parse_text(text: str, rel_path: str) -> Document:
    """Plain text → Document; an empty file gives the file stem as title and no text."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    title = ""
    for i, line in enumerate(lines):
        if line.strip():
            title = line.strip()
            body = "\n".join(lines[i + 1 :]).strip()
            break
    else:
        body = ""
    return Document(
        id=rel_path,
        title=title or Path(rel_path).stem,
        sections=(Section("", body),) if body else (),
        path=rel_path,
    )


def read_utf8(parse: Callable[[str, str], Document], path: Path, rel_path: str) -> Iterator[Document | IngestError]:
    """One Document `parse(text, rel_path)` makes of a UTF-8 file, or one IngestError (bad UTF-8,
    unreadable)."""
    try:
        yield parse(path.read_text(encoding="utf-8"), rel_path)
    except UnicodeDecodeError as exc:
        yield IngestError(rel_path, f"not UTF-8: {exc.reason} at byte {exc.start}")
    except OSError as exc:
        yield IngestError(rel_path, f"cannot read: {exc.strerror or exc}")


def read_text(path: Path, rel_path: str) -> Iterator[Document | IngestError]:
    """One Document for a .txt file, or one IngestError (bad UTF-8, unreadable)."""
    return read_utf8(parse_text, path, rel_path)
