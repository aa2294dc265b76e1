"""Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx) readers.

DOCX: paragraphs and tables in document order. A paragraph of style "Heading N" starts a
section at level N (its trail: the headings above it), "Title" is the title unless the core
properties name one (else the first heading, else the file stem). A table is one line per row,
cells joined by " | " (a merged cell once). Word has no fixed pages: no page numbers.

PPTX: one section per slide, its heading the slide's title placeholder, its text every other
shape's text (groups and tables included) and the speaker notes; `Section.page` is the slide
number. Title: the core properties' title, else the first slide's title, else the file stem.

An Office file that is an OLE compound file instead of a ZIP package is what Office writes
for a password-protected document: refused as encrypted. Anything the libraries cannot open
is refused as corrupt.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..types import Document, IngestError, IngestWarning, Section

__all__ = ["office_problem", "read_docx", "read_pptx"]

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"heading\s*(\d)$", re.I)
ReadItem = Document | IngestError | IngestWarning


def office_problem(data: bytes, rel_path: str, kind: str) -> IngestError | None:
    """Why `data` is no Office Open XML file of `kind` ('Word'...), or None when it may be one."""
    if data.startswith(OLE_MAGIC):
        return IngestError(rel_path, f"encrypted {kind} file (or a legacy binary Office file with a new suffix): "
                                     "save a copy without a password, as .docx/.pptx/.xlsx", kind="encrypted")
    if not data.startswith(b"PK"):
        return IngestError(rel_path, f"corrupt {kind} file: not a ZIP package", kind="corrupt")
    return None


def _corrupt(rel_path: str, kind: str, exc: Exception) -> IngestError:
    return IngestError(rel_path, f"corrupt {kind} file: {type(exc).__name__}: {str(exc)[:160]}", kind="corrupt")


def _row_text(cells: Iterable[str]) -> str:
    seen: list[str] = []
    for text in cells:
        text = " ".join(text.split())
        if text and (not seen or seen[-1] != text):  # a merged cell repeats in each grid column
            seen.append(text)
    return " | ".join(seen)


def _docx_blocks(document: Any) -> Iterator[tuple[int | None, str]]:
    """(heading level or None, text) of each paragraph and table row, in order; level 0: Title."""
    from docx.table import Table

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                line = _row_text(cell.text for cell in row.cells)
                if line:
                    yield None, line
            continue
        text = block.text.strip()
        if not text:
            continue
        name = (block.style.name if block.style is not None else "") or ""
        m = _HEADING_STYLE.match(name.strip())
        if m and int(m.group(1)) > 0:
            yield int(m.group(1)), " ".join(text.split())
        elif name.strip().lower() == "title":
            yield 0, " ".join(text.split())
        else:
            yield None, text


def read_docx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    """One Document for a .docx file (module docstring), or one IngestError."""
    problem = office_problem(data, rel_path, "Word")
    if problem is not None:
        yield problem
        return
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
        core_title = (document.core_properties.title or "").strip()
    except Exception as exc:
        yield _corrupt(rel_path, "Word", exc)
        return
    sections: list[Section] = []
    heading = ""
    above: list[tuple[int, str]] = []  # (level, heading) of the current one and those enclosing it
    buf: list[str] = []
    title_style = first_heading = ""
    for level, text in blocks:
        if level is None:
            buf.append(text)
            continue
        if level == 0:
            title_style = title_style or text
            continue
        sections.append(Section(heading, "\n".join(buf), " / ".join(h for _, h in above[:-1])))
        while above and above[-1][0] >= level:
            above.pop()
        above.append((level, text))
        heading, buf = text, []
        first_heading = first_heading or text
    sections.append(Section(heading, "\n".join(buf), " / ".join(h for _, h in above[:-1])))
    kept = tuple(s for s in sections if s.text or s.heading)
    title = core_title or title_style or first_heading or Path(rel_path).stem
    yield Document(id=rel_path, title=title, sections=kept, path=rel_path)


def _shape_texts(shapes: Iterable[Any], skip: int | None) -> Iterator[str]:
    """The text of each shape but the one whose shape_id is `skip` (the title), groups and
    tables included."""
    for shape in shapes:
        if skip is not None and shape.shape_id == skip:
            continue
        if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):  # a group
            yield from _shape_texts(shape.shapes, skip)
        elif getattr(shape, "has_table", False):
            for row in shape.table.rows:
                line = _row_text(cell.text for cell in row.cells)
                if line:
                    yield line
        elif getattr(shape, "has_text_frame", False):
            text = shape.text_frame.text.strip()
            if text:
                yield text


def read_pptx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    """One Document for a .pptx file (module docstring), or one IngestError."""
    problem = office_problem(data, rel_path, "PowerPoint")
    if problem is not None:
        yield problem
        return
    import pptx

    try:
        deck = pptx.Presentation(io.BytesIO(data))
        sections: list[Section] = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            heading = " ".join((title_shape.text if title_shape is not None else "").split())
            texts = list(_shape_texts(slide.shapes, title_shape.shape_id if title_shape is not None else None))
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text.strip()
                if notes:
                    texts.append(notes)
            if heading or texts:
                sections.append(Section(heading, "\n".join(texts), "", number))
        core_title = (deck.core_properties.title or "").strip()
    except Exception as exc:
        yield _corrupt(rel_path, "PowerPoint", exc)
        return
    first = next((s.heading for s in sections if s.heading), "")
    yield Document(id=rel_path, title=core_title or first or Path(rel_path).stem, sections=tuple(sections),
                   path=rel_path)
