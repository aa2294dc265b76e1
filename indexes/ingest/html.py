"""HTML reader (stdlib `html.parser`): title, sections by h1–h3, plain text.

Rationale: docs/design-notes.md, "indexes/ingest/html.py".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from ..types import Document, IngestError, Section
from .text import read_utf8

__all__ = ["parse_html", "read_html"]

_DROP = frozenset({"script", "style", "nav", "noscript", "template", "svg", "head"})
_BLOCK = frozenset(
    """p div br li tr td th pre blockquote section article header footer ul ol table
    dl dt dd h4 h5 h6 hr figure figcaption main aside""".split()
)
_SECTION = frozenset({"h1", "h2", "h3"})


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.first_h1 = ""
        self.sections: list[Section] = []
        self._heading = ""
        self._buf: list[str] = []
        self._drop_depth = 0
        self._in_title = False
        self._in_heading: str | None = None
        self._heading_buf: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _DROP:
            self._drop_depth += 1
        elif tag in _SECTION and not self._drop_depth:
            self._in_heading = tag
            self._heading_buf = []
        elif tag in _BLOCK:
            self._buf.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _DROP:
            self._drop_depth = max(0, self._drop_depth - 1)
        elif tag in _SECTION and self._in_heading == tag:
            self._in_heading = None
            heading = " ".join("".join(self._heading_buf).split())
            self.sections.append(Section(self._heading, _clean("".join(self._buf))))
            self._heading, self._buf = heading, []
            if tag == "h1" and not self.first_h1:
                self.first_h1 = heading
        elif tag in _BLOCK:
            self._buf.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._drop_depth:
            return
        elif self._in_heading:
            self._heading_buf.append(data)
        else:
            self._buf.append(data)

    def finish(self) -> list[Section]:
        self.close()
        self.sections.append(Section(self._heading, _clean("".join(self._buf))))
        return [s for s in self.sections if s.text or s.heading]


def _clean(text: str) -> str:
    lines = (" ".join(ln.split()) for ln in text.split("\n"))
    return re.sub(r"\n{2,}", "\n", "\n".join(lines)).strip()


def parse_html(text: str, rel_path: str) -> Document:
    """HTML source → Document with id = path = rel_path."""
    ex = _Extractor()
    ex.feed(text)
    sections = ex.finish()
    title = " ".join(ex.title.split()) or ex.first_h1 or Path(rel_path).stem
    return Document(id=rel_path, title=title, sections=tuple(sections), path=rel_path)


def read_html(path: Path, rel_path: str) -> Iterator[Document | IngestError]:
    """One Document for an HTML file, or one IngestError (bad UTF-8, unreadable)."""
    return read_utf8(parse_html, path, rel_path)
