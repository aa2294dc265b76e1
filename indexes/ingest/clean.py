"""The last step of every reader: a document as it may reach a caller (`indexes.safe_text`),
with a report of each change (nothing unchecked reaches a caller, nothing silently
replaced).

Rationale: docs/design-notes.md, "indexes/ingest/clean.py".
"""

from __future__ import annotations

import dataclasses

from ..safe_text import MAX_TITLE_CHARS, clean_text, clean_title, resolve_url, url_problem
from ..types import Document, IngestWarning, Section
from .fields import cover_size_problem

__all__ = ["clean_document"]

_SHOWN_URL_CHARS = 80


def _shown(url: str) -> str:
    """A URL as a report quotes it: control characters as '?', at most 80 characters."""
    text = "".join("?" if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F else c for c in url)
    return repr(text if len(text) <= _SHOWN_URL_CHARS else text[: _SHOWN_URL_CHARS - 1] + "…")


def _size_problem(size: object, key: str) -> str | None:
    if isinstance(size, bool) or not isinstance(size, int):
        return f"'cover_image.{key}' must be an integer"
    return cover_size_problem(size, key)


def clean_document(doc: Document, url_base: str | None = None) -> tuple[Document, list[IngestWarning]]:
    """(`doc` as it may be indexed and served, one IngestWarning per kind of change).

    url_base: an absolute http(s) URL that relative page URLs are resolved against
    (`kbgate index add --url-base`), or None (a relative URL is then not kept). Where the
    warnings point: `doc.origin`, else the document's id. Never raises.
    """
    where = doc.origin or doc.id
    notes: list[IngestWarning] = []
    url = doc.url
    if url is not None:
        resolved = resolve_url(url, url_base)
        problem = url_problem(resolved)
        if problem is not None:
            notes.append(IngestWarning(where, f"url {_shown(url)} {problem}: not kept (page URLs are http or https)"))
            url = None
        else:
            url = resolved
    cover = doc.cover_image
    if cover is not None:
        problem = url_problem(cover.url.strip())
        if problem is not None:  # a cover is only shown from where it is: no base to resolve against
            notes.append(IngestWarning(where, f"cover_image url {_shown(cover.url)} {problem}: not kept "
                                              "(cover image URLs are http or https, like page URLs)"))
            cover = None
        elif cover.url != cover.url.strip():
            cover = dataclasses.replace(cover, url=cover.url.strip())
    if cover is not None:  # readers refuse these first (fields.parse_cover_image); a Document built in code here
        height, width = cover.height, cover.width
        for key, size in (("height", height), ("width", width)):
            if size is not None and (problem := _size_problem(size, key)) is not None:
                notes.append(IngestWarning(where, f"{problem}: not kept"))
        height = height if height is None or _size_problem(height, "height") is None else None
        width = width if width is None or _size_problem(width, "width") is None else None
        if (height, width) != (cover.height, cover.width):
            cover = dataclasses.replace(cover, height=height, width=width)
    title = clean_title(doc.title)
    if len(" ".join(clean_text(doc.title).split())) > MAX_TITLE_CHARS:
        notes.append(IngestWarning(where, f"title of {len(doc.title)} characters cut to {MAX_TITLE_CHARS}"))
    summary = None if doc.summary is None else clean_text(doc.summary)
    sections = tuple(Section(clean_text(s.heading), clean_text(s.text), clean_text(s.trail), s.page)
                     for s in doc.sections)
    changed = [name for name, dirty in (("title", clean_text(doc.title) != doc.title),
                                        ("summary", summary != doc.summary),
                                        ("text", sections != doc.sections)) if dirty]
    if changed:
        notes.append(IngestWarning(where, "control characters or non-characters removed from the "
                                          + ", ".join(changed)))
    if (url, cover, title, summary, sections) == (doc.url, doc.cover_image, doc.title, doc.summary, doc.sections):
        return doc, notes
    return dataclasses.replace(doc, url=url, cover_image=cover, title=title, summary=summary,
                               sections=sections), notes
