"""PDF reader (pypdf): the text layer page by page, headings from the outline, the page of
each section.

Rationale: docs/design-notes.md, "indexes/ingest/pdf.py".
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..types import Document, IngestError, IngestWarning, Section
from .office import too_much_text

__all__ = ["read_pdf"]

_SPACES = re.compile(r"[ \t\u00a0]+")


@dataclass(frozen=True, slots=True)
class _Entry:
    """One outline entry: its title, 1-based page, and the titles of the entries above it."""

    title: str
    page: int
    above: tuple[str, ...]


def _outline(reader: Any) -> list[_Entry]:
    """The outline entries in document order (entries without a page are left out)."""
    out: list[_Entry] = []

    def walk(items: list[Any], above: tuple[str, ...]) -> None:
        last = ""
        for item in items:
            if isinstance(item, list):
                walk(item, (*above, last) if last else above)
                continue
            title = " ".join(str(getattr(item, "title", "") or "").split())
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a destination pypdf cannot resolve: no place for a heading
                page = None
            if title and page is not None and page >= 0:
                out.append(_Entry(title, page + 1, above))
            last = title or last

    try:
        walk(list(reader.outline), ())
    except Exception:  # a damaged outline: the text is still read, page by page
        return []
    return sorted(out, key=lambda e: e.page)  # stable: entries of one page keep their order


def _has_images(page: Any) -> bool:
    """Does the page draw an image XObject (what a scan is made of)?"""
    try:
        xobjects = page["/Resources"].get_object().get("/XObject")
        if xobjects is None:
            return False
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.get_object().values())
    except Exception:
        return False


def _clean(text: str) -> str:
    lines = (_SPACES.sub(" ", ln).strip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return "\n".join(ln for ln in lines if ln)


def _find(title: str, text: str, start: int) -> tuple[int, int] | None:
    """(start, end) of `title` in `text` from `start`, whitespace between its words free."""
    pattern = r"\s*".join(re.escape(w) for w in title.split())
    m = re.compile(pattern).search(text, start) if pattern else None
    return (m.start(), m.end()) if m else None


def _sections(pages: list[str], entries: list[_Entry]) -> list[Section]:
    """Sections of the page texts, cut at the outline entries (module docstring)."""
    out: list[Section] = []
    heading, trail = "", ""
    by_page: dict[int, list[_Entry]] = {}
    for e in entries:
        by_page.setdefault(e.page, []).append(e)
    for number, text in enumerate(pages, start=1):
        pos = 0
        for e in by_page.get(number, []):
            found = _find(e.title, text, pos)
            cut, after = found if found is not None else (pos, pos)
            body = text[pos:cut].strip()
            if body:
                out.append(Section(heading, body, trail, number))
            heading, trail, pos = e.title, " / ".join(e.above), after
        body = text[pos:].strip()
        if body or (pos and heading):
            out.append(Section(heading, body, trail, number))
    return out


def read_pdf(data: bytes, rel_path: str, limit: int) -> Iterator[Document | IngestError | IngestWarning]:
    """One Document for a PDF (module docstring), or one IngestError saying why not.

    data: the file's bytes; rel_path: its path (the Document's id and path); limit: the most
    bytes of text read (pages are compressed streams that expand) before the file is refused as
    too large, at the first page past it."""
    import pypdf
    from pypdf import PasswordType

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its notes on damaged objects: not ours to print
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception:  # an encryption pypdf cannot undo (a missing AES library)
                opened = PasswordType.NOT_DECRYPTED
            if opened == PasswordType.NOT_DECRYPTED:
                yield IngestError(rel_path, "encrypted PDF: it opens only with a password, so its text cannot be "
                                            "read (save a copy without the password)", kind="encrypted")
                return
        pages = list(reader.pages)
    except Exception as exc:
        yield IngestError(rel_path, f"corrupt PDF: pypdf cannot read it ({type(exc).__name__}: "
                                    f"{str(exc)[:160]})", kind="corrupt")
        return
    texts: list[str] = []
    failed: list[int] = []
    size = 0
    for number, page in enumerate(pages, start=1):
        try:
            texts.append(_clean(page.extract_text() or ""))
        except Exception:
            texts.append("")
            failed.append(number)
        size += len(texts[-1].encode("utf-8")) + 1
        if size > limit:  # compressed page streams expand: stop at the first page past the limit
            yield too_much_text(rel_path, size, limit, "pdf")
            return
    blank = [n for n, t in enumerate(texts, start=1) if not t]
    scanned = [n for n in blank if n not in failed and _has_images(pages[n - 1])]
    if len(blank) == len(texts):
        if failed:
            yield IngestError(rel_path, f"corrupt PDF: the text of its {len(texts)} page(s) cannot be extracted",
                              kind="corrupt")
        elif scanned:
            yield IngestError(rel_path, "scanned image without text: no page has a text layer (run OCR on it "
                                        "first, e.g. ocrmypdf)", kind="no_text")
        else:
            yield IngestError(rel_path, "no text: no page of this PDF holds text", kind="no_text")
        return
    entries = _outline(reader)
    info_title = ""
    try:
        info = reader.metadata
        info_title = " ".join(str(info.get("/Title") or "").split()) if info is not None else ""
    except Exception:
        info_title = ""
    first_line = next((t.split("\n", 1)[0] for t in texts if t), "")
    title = info_title or (entries[0].title if entries else "") or first_line or Path(rel_path).stem
    yield Document(id=rel_path, title=title, sections=tuple(_sections(texts, entries)), path=rel_path)
    if scanned:
        yield IngestWarning(rel_path, f"page(s) {_pages(scanned)} hold images without text (scanned?): "
                                      "their text is not indexed")
    if failed:
        yield IngestWarning(rel_path, f"the text of page(s) {_pages(failed)} cannot be extracted: not indexed")


def _pages(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
