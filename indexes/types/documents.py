"""A document as readers make it and the index keeps it: metadata, cover, sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

MetaScalar: TypeAlias = str | int | float
MetaValue: TypeAlias = MetaScalar | tuple[MetaScalar, ...]
Metadata: TypeAlias = tuple[tuple[str, MetaValue], ...]
"""A document's kept metadata: (name, value) pairs sorted by name, names unique. A value is a
string, a number or a tuple of them (a list of tags). What readers keep, and its bounds:
`indexes.ingest.metadata`; how it is indexed and filtered on: `indexes.metadata`."""


@dataclass(frozen=True, slots=True)
class CoverImage:
    """A cover picture: height and width in pixels, url absolute."""

    url: str
    height: int | None = None
    width: int | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a source document: heading text (may be '') and plain body text.

    trail: the headings above this one below the page's top level, outermost first, joined
    by " / " (Markdown "## 配置" above "### 参数" gives "配置" for the latter); '' when none.
    Indexed with the section's chunks, not shown.
    page: the 1-based page (PDF) or slide (PPTX) the section starts on, None where the format
    has no pages; each chunk carries the page it starts on as its `page` metadata.
    """

    heading: str
    text: str
    trail: str = ""
    page: int | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """One source document as read by an ingest reader, before chunking.

    id: stable document id (JSONL `id`, or the Markdown path relative to the
        ingested folder, with forward slashes).
    sections: the plain text of the document in order; a JSONL record or a plain
        text file is one section with heading ''.
    publish_time: unix seconds, or None when unknown.
    path: the tree path used by scope path globs ('' for JSONL unless given).
    dataset: the dataset name used by scope policies ('' when not given).
    qa_visible: False hides the document from every search and read.
    metadata: further front-matter / JSONL fields kept for filtering (`Metadata`).
    origin: where it was read, for reports ("rows.jsonl:3", "guide/a.md"; '' when built in
        code). Not indexed, not part of the revision, not compared.
    source: the real path of the file it was read from ('' when built in code); stored on
        chunk 0, so a later run never replaces it from another file unasked
        (`indexes.writer.ingest`). Not part of the revision, not compared.
    """

    id: str
    title: str
    sections: tuple[Section, ...]
    url: str | None = None
    summary: str | None = None
    publish_time: int | None = None
    cover_image: CoverImage | None = None
    path: str = ""
    dataset: str = ""
    qa_visible: bool = True
    metadata: Metadata = ()
    origin: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """The whole plain text: section headings and bodies joined by newlines."""
        parts: list[str] = []
        for s in self.sections:
            if s.heading:
                parts.append(s.heading)
            if s.text:
                parts.append(s.text)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One document of an index as listed: read from its chunk 0. chunks: how many it has."""

    doc_id: str
    title: str
    path: str
    dataset: str
    revision: str
    qa_visible: bool
    chunks: int


@dataclass(frozen=True, slots=True)
class ChunkView:
    """One stored chunk. n: its number (0-based, the `chunk` of a hit); section: its section's
    number; heading: its section's heading ('' for none); text: its text as stored (the first
    `overlap` characters repeat the chunk before); page: the PDF page or slide it starts on."""

    n: int
    section: int
    heading: str
    text: str
    overlap: int
    page: int | None
