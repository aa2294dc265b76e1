"""Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx) readers.

Rationale: docs/design-notes.md, "indexes/ingest/office.py".
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..types import Document, IngestError, IngestWarning, Section
from .jsonl import too_large

__all__ = ["UNPACKED_FACTOR", "docx_text_scan", "office_problem", "read_docx", "read_pptx", "too_much_text",
           "unpacked_problem"]

UNPACKED_FACTOR = 16
"""How many times the text limit an Office package's parts may hold once unzipped (XML markup
is several times the text it holds; images are stored already compressed)."""
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"heading\s*(\d)$", re.I)
ReadItem = Document | IngestError | IngestWarning


def office_problem(data: bytes, rel_path: str, kind: str, limit: int) -> IngestError | None:
    """Why `data` is no Office Open XML file of `kind` ('Word'...) to parse, or None when it may
    be one: encrypted (or a legacy binary file), not a ZIP package, or a ZIP bomb
    (`unpacked_problem`, against `limit` bytes of text). Every reader asks this first."""
    if data.startswith(OLE_MAGIC):
        return IngestError(rel_path, f"encrypted {kind} file (or a legacy binary Office file with a new suffix): "
                                     "save a copy without a password, as .docx/.pptx/.xlsx", kind="encrypted")
    if not data.startswith(b"PK"):
        return IngestError(rel_path, f"corrupt {kind} file: not a ZIP package", kind="corrupt")
    return unpacked_problem(data, rel_path, kind, limit)


def too_much_text(rel_path: str, size: int, limit: int, kind: str) -> IngestError:
    """The too_large refusal of an Office file of `kind` ('docx'...) whose text read so far,
    `size` bytes, is over `limit` (the kind and wording `formats.read_bytes` gives after a conversion)."""
    return IngestError(rel_path, f"{too_large(size, limit)} (its text, once converted from {kind}: reading "
                                 "stopped there)", kind="too_large")


def unpacked_problem(data: bytes, rel_path: str, kind: str, limit: int) -> IngestError | None:
    """A too_large IngestError when the ZIP package `data` says its parts unzip to over
    UNPACKED_FACTOR x `limit` bytes (a ZIP bomb), else None (also for a ZIP too broken to say:
    the library then refuses it as corrupt)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            unpacked = sum(info.file_size for info in package.infolist())
    except Exception:
        return None
    if unpacked <= UNPACKED_FACTOR * limit:
        return None
    return IngestError(rel_path, f"its parts unzip to {unpacked} bytes, over {UNPACKED_FACTOR} x the maximum "
                                 f"document size of {limit} bytes (indexes.max_document_bytes): refused unread "
                                 f"({kind} file)", kind="too_large")


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MAIN_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"


def _main_part(package: zipfile.ZipFile) -> str:
    """The ZIP name of a package's main part (from _rels/.rels), else word/document.xml."""
    try:
        for rel in ElementTree.fromstring(package.read("_rels/.rels")):
            if rel.get("Type") == _MAIN_REL and rel.get("TargetMode") != "External":
                return str(rel.get("Target") or "").lstrip("/")
    except Exception:
        pass
    return "word/document.xml"


def docx_text_scan(data: bytes, limit: int) -> tuple[int, int]:
    """(bytes of text, paragraphs) in the main part of the DOCX package `data`, streamed without
    keeping its tree and stopped as soon as the text passes `limit` bytes (so bytes > limit
    means: over the limit, read no further). Text: each w:t's UTF-8 bytes, a tab or break 1,
    a paragraph's end 1. Raises what zipfile or the XML parser raise on a broken package."""
    size = paragraphs = depth = 0
    body: ElementTree.Element | None = None
    with zipfile.ZipFile(io.BytesIO(data)) as package, package.open(_main_part(package)) as part:
        for event, elem in ElementTree.iterparse(part, events=("start", "end")):
            if event == "start":
                depth += 1
                if depth == 2:
                    body = elem
                continue
            depth -= 1
            tag = elem.tag
            if tag == f"{_W}t":
                size += len((elem.text or "").encode("utf-8"))
            elif tag in (f"{_W}tab", f"{_W}br", f"{_W}cr"):
                size += 1
            elif tag == f"{_W}p":
                size += 1
                paragraphs += 1
            elem.clear()  # what is counted is dropped: memory stays flat
            if depth == 2 and body is not None:  # (the emptied blocks of the body too)
                body.clear()
            if size > limit:
                break
    return size, paragraphs


def _corrupt(rel_path: str, kind: str, exc: Exception) -> IngestError:
    return IngestError(rel_path, f"corrupt {kind} file: {type(exc).__name__}: {str(exc)[:160]}", kind="corrupt")


def _row_text(cells: Iterable[str]) -> str:
    seen: list[str] = []
    for text in cells:
        text = " ".join(text.split())
        if text and (not seen or seen[-1] != text):  # a merged cell repeats in each grid column
            seen.append(text)
    return " | ".join(seen)


def _paragraph_styles(document: Any) -> tuple[dict[str, str], str]:
    """({style id: name} of the paragraph styles, the default paragraph style's name): looked up
    once, as python-docx's `Paragraph.style` would per paragraph (about 1 ms each)."""
    from docx.enum.style import WD_STYLE_TYPE

    styles = document.styles
    names = {s.style_id: s.name or "" for s in styles if s.type == WD_STYLE_TYPE.PARAGRAPH and s.style_id}
    default = styles.default(WD_STYLE_TYPE.PARAGRAPH)
    return names, (default.name or "") if default is not None else ""


def _docx_blocks(document: Any) -> Iterator[tuple[int | None, str]]:
    """(heading level or None, text) of each paragraph and table row, in order; level 0: Title."""
    from docx.table import Table

    names, default = _paragraph_styles(document)
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
        style_id = block._p.style  # a missing or unknown id: the default style, as python-docx
        name = names.get(style_id, default) if style_id else default
        m = _HEADING_STYLE.match(name.strip())
        if m and int(m.group(1)) > 0:
            yield int(m.group(1)), " ".join(text.split())
        elif name.strip().lower() == "title":
            yield 0, " ".join(text.split())
        else:
            yield None, text


def read_docx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    """One Document for a .docx file (module docstring), or one IngestError."""
    problem = office_problem(data, rel_path, "Word", limit)
    if problem is not None:
        yield problem
        return
    import docx

    try:
        scanned = docx_text_scan(data, limit)[0]
        if scanned > limit:
            yield too_much_text(rel_path, scanned, limit, "docx")
            return
        document = docx.Document(io.BytesIO(data))
        blocks: list[tuple[int | None, str]] = []
        size = 0
        for level, text in _docx_blocks(document):
            size += len(text.encode("utf-8")) + 1
            if size > limit:  # text the scan does not count (a field's result...): stop here too
                yield too_much_text(rel_path, size, limit, "docx")
                return
            blocks.append((level, text))
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
    problem = office_problem(data, rel_path, "PowerPoint", limit)
    if problem is not None:
        yield problem
        return
    import pptx

    try:
        deck = pptx.Presentation(io.BytesIO(data))
        sections: list[Section] = []
        size = 0
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            heading = " ".join((title_shape.text if title_shape is not None else "").split())
            texts = list(_shape_texts(slide.shapes, title_shape.shape_id if title_shape is not None else None))
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text.strip()
                if notes:
                    texts.append(notes)
            size += sum(len(t.encode("utf-8")) + 1 for t in (heading, *texts))
            if size > limit:
                yield too_much_text(rel_path, size, limit, "pptx")
                return
            if heading or texts:
                sections.append(Section(heading, "\n".join(texts), "", number))
        core_title = (deck.core_properties.title or "").strip()
    except Exception as exc:
        yield _corrupt(rel_path, "PowerPoint", exc)
        return
    first = next((s.heading for s in sections if s.heading), "")
    yield Document(id=rel_path, title=core_title or first or Path(rel_path).stem, sections=tuple(sections),
                   path=rel_path)
