"""The one registry of document formats: which converter reads a file, by suffix or media type.

Rationale: docs/design-notes.md, "indexes/ingest/formats.py".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..types import Document, IngestError, IngestWarning
from .bounds import DEFAULT_READ_BOUNDS, ReadBounds, markup_problem, nesting_problem
from .html import parse_html
from .jsonl import too_large
from .markdown import parse_markdown_kept
from .text import parse_text

__all__ = ["FORMATS", "Format", "format_of", "read_bytes", "supported"]

ReadItem = Document | IngestError | IngestWarning
Reader = Callable[[bytes, str, int], Iterator[ReadItem]]
"""read(data, rel_path, limit) → the Document of the file (id = path = rel_path) and its notes,
or IngestErrors. limit: the most bytes of text the document may hold."""


@dataclass(frozen=True, slots=True)
class Format:
    """One format: its name, the suffixes and media types that name it, its reader, and
    whether it is text (an empty or whitespace-only file holds no document)."""

    name: str
    suffixes: tuple[str, ...]
    media_types: tuple[str, ...]
    read: Reader
    text: bool = False


def _decoded(data: bytes, rel_path: str) -> str | IngestError:
    try:
        return data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        return IngestError(rel_path, f"not UTF-8: {exc.reason} at byte {exc.start}", kind="unreadable")


def _markdown(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    text = _decoded(data, rel_path)
    if isinstance(text, IngestError):
        yield text
        return
    try:
        doc, notes = parse_markdown_kept(text, rel_path)
    except ValueError as exc:
        yield IngestError(rel_path, str(exc), kind="invalid")
        return
    yield doc
    yield from notes


def _html(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    text = _decoded(data, rel_path)
    yield text if isinstance(text, IngestError) else parse_html(text, rel_path)


def _text(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    text = _decoded(data, rel_path)
    yield text if isinstance(text, IngestError) else parse_text(text, rel_path)


def _pdf(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    from .pdf import read_pdf

    return read_pdf(data, rel_path, limit)


def _docx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    from .office import read_docx

    return read_docx(data, rel_path, limit)


def _pptx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    from .office import read_pptx

    return read_pptx(data, rel_path, limit)


def _xlsx(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    from .sheets import read_xlsx

    return read_xlsx(data, rel_path, limit)


def _rst(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    from .markup import read_rst

    return read_rst(data, rel_path, limit)


_OOXML = "application/vnd.openxmlformats-officedocument"
FORMATS: tuple[Format, ...] = (
    Format("markdown", (".md", ".markdown"), ("text/markdown", "text/x-markdown"), _markdown, text=True),
    Format("html", (".html", ".htm"), ("text/html", "application/xhtml+xml"), _html, text=True),
    Format("text", (".txt",), ("text/plain",), _text, text=True),
    Format("pdf", (".pdf",), ("application/pdf",), _pdf),
    Format("docx", (".docx",), (f"{_OOXML}.wordprocessingml.document",), _docx),
    Format("pptx", (".pptx",), (f"{_OOXML}.presentationml.presentation",), _pptx),
    Format("xlsx", (".xlsx",), (f"{_OOXML}.spreadsheetml.sheet",), _xlsx),
    Format("rst", (".rst", ".rest"), ("text/x-rst", "text/prs.fallenstein.rst"), _rst, text=True),
)
_BY_SUFFIX = {s: f for f in FORMATS for s in f.suffixes}
_BY_TYPE = {t: f for f in FORMATS for t in f.media_types}


def format_of(name: str, media_type: str | None = None) -> Format | None:
    """The format of a file named `name` (its suffix, any case), or of `media_type` when that
    is given and known (parameters such as '; charset=utf-8' ignored): a media type wins over
    the name, so an upload named 'report' with type application/pdf is read as PDF. None: no
    converter reads it."""
    if media_type:
        known = _BY_TYPE.get(media_type.split(";", 1)[0].strip().lower())
        if known is not None:
            return known
    return _BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def supported() -> str:
    """The suffixes a run reads, for messages: '.docx, .htm, .html, ...' (.jsonl included)."""
    return ", ".join(sorted({*_BY_SUFFIX, ".jsonl"}))


def read_bytes(data: bytes, rel_path: str, *, media_type: str | None = None,
               max_document_bytes: int, bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> Iterator[ReadItem]:
    """The Document of one file's bytes (id = path = rel_path) and its notes, or the
    IngestErrors / IngestWarnings saying why there is none. Never raises for bad input.

    rel_path: the file's path (its suffix picks the format unless `media_type` does:
    `format_of`). max_document_bytes: larger files are refused (too_large), and so is a
    document whose text, once converted, is larger (an Office file expands when unzipped).
    An empty file (0 bytes; for text formats also only whitespace) is an IngestWarning.
    bounds: nesting and markup are checked before a converter parses anything
    (`indexes.ingest.bounds`: a reStructuredText file nested too deep, an Office package of too
    many XML elements is refused unparsed, too_large naming the limit). This runs in the
    calling process: `indexes.ingest.confine` runs it in a child within memory and CPU limits.
    An unexpected exception of a converter library refuses the file as corrupt: one bad file
    never stops a run.
    """
    fmt = format_of(rel_path, media_type)
    if fmt is None:
        suffix = PurePosixPath(rel_path).suffix.lower() or "(none)"
        what = f"media type {media_type!r}" if media_type else f"file type {suffix!r}"
        yield IngestError(rel_path, f"unsupported {what} (kbgate reads {supported()})", kind="unsupported")
        return
    if not data:
        yield IngestWarning(rel_path, "empty file (0 bytes): skipped")
        return
    if len(data) > max_document_bytes:
        yield IngestError(rel_path, too_large(len(data), max_document_bytes), kind="too_large")
        return
    if fmt.text and not data.decode("utf-8", "replace").lstrip("\ufeff").strip():
        yield IngestWarning(rel_path, "empty file (only whitespace): skipped")
        return
    problem = _structure_problem(fmt, data, rel_path, max_document_bytes, bounds)
    if problem is not None:
        yield problem
        return
    try:
        for item in fmt.read(data, rel_path, max_document_bytes):
            if isinstance(item, Document) and not fmt.text:
                size = len(item.text.encode("utf-8"))
                if size > max_document_bytes:
                    yield IngestError(rel_path, f"{too_large(size, max_document_bytes)} (its text, once converted "
                                                f"from {fmt.name})", kind="too_large")
                    return
            yield item
    except MemoryError:  # out of the reader's memory (indexes.ingest.confine): not the file's fault alone
        raise
    except Exception as exc:  # a library's own failure on a malformed file: that file only
        yield IngestError(rel_path, f"corrupt {fmt.name} file: {type(exc).__name__}: {str(exc)[:160]}",
                          kind="corrupt")


_OFFICE_KINDS = {"docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel"}


def _structure_problem(fmt: Format, data: bytes, rel_path: str, limit: int, bounds: ReadBounds) -> IngestError | None:
    """Why a file of `fmt` is refused before its converter runs (`indexes.ingest.bounds`), or None."""
    if fmt.name == "rst":
        return nesting_problem(data.decode("utf-8", "replace"), rel_path, bounds)
    kind = _OFFICE_KINDS.get(fmt.name)
    if kind is None:
        return None
    from .office import office_problem

    return office_problem(data, rel_path, kind, limit) or markup_problem(data, rel_path, kind, bounds)
