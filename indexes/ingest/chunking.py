"""Split a `Document` into `Chunk`s, the units that are indexed and returned.

Rationale: docs/design-notes.md, "indexes/ingest/chunking.py".
"""

from __future__ import annotations

import re

from ..types import Chunk, Document

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_OVERLAP_CHARS", "chunk"]

DEFAULT_MAX_CHARS = 600
DEFAULT_OVERLAP_CHARS = 120

_SENTENCE_END = re.compile(r"[。！？!?\n]+")


def _segments(text: str, max_chars: int) -> list[int]:
    """Boundaries [0, ..., len(text)] at sentence ends, no segment longer than max_chars."""
    bounds = [0]
    for m in _SENTENCE_END.finditer(text):
        if m.end() > bounds[-1]:
            bounds.append(m.end())
    if bounds[-1] != len(text):
        bounds.append(len(text))
    out = [0]
    for end in bounds[1:]:
        start = out[-1]
        while end - start > max_chars:
            start += max_chars
            out.append(start)
        if end > out[-1]:
            out.append(end)
    return out


def _split(text: str, max_chars: int, overlap_chars: int) -> list[tuple[int, int, int]]:
    """(start, end, overlap) character ranges covering `text` in order."""
    if len(text) <= max_chars:
        return [(0, len(text), 0)]
    b = _segments(text, max_chars)
    pieces: list[tuple[int, int, int]] = []
    i = 0  # index into b of the current piece start
    overlap = 0
    while i < len(b) - 1:
        j = i + 1
        while j + 1 < len(b) and b[j + 1] - b[i] <= max_chars:
            j += 1
        pieces.append((b[i], b[j], overlap))
        if j == len(b) - 1:
            break
        # Start the next piece one sentence back when that sentence is short.
        if j - 1 > i and b[j] - b[j - 1] <= overlap_chars and b[j + 1] - b[j - 1] <= max_chars:
            overlap = b[j] - b[j - 1]
            i = j - 1
        else:
            overlap = 0
            i = j
    return pieces


def chunk(
    document: Document,
    max_chars: int = DEFAULT_MAX_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    *,
    merge_sections: bool = True,
    alone_chars: int = 0,
) -> list[Chunk]:
    """Chunks of `document` in order, numbered 0..n-1.

    max_chars: upper bound of a chunk body in characters (>= 50).
    overlap_chars: longest sentence repeated at the start of the next piece.
    alone_chars: a section whose text has at least this many characters is a chunk of its own
        (0: none is; short sections around it still join each other). Off by default: measured
        on the shared sets it lost questions (docs/search-quality.md, "Chunks").
    Sections whose text is empty or blank produce no chunk; a document without
    any text gives one chunk holding its title, so that it remains findable.
    Raises ValueError for max_chars < 50.
    """
    if max_chars < 50:
        raise ValueError(f"max_chars must be at least 50, got {max_chars}")
    out: list[Chunk] = []
    pending: list[tuple[int, str, str]] = []  # (section index, heading, text) to merge

    def flush() -> None:
        if not pending:
            return
        s_index, heading, _ = pending[0]
        parts = [pending[0][2]] + [f"{h}\n{t}" if h else t for _, h, t in pending[1:]]
        out.append(Chunk(document.id, len(out), heading, "\n".join(parts), 0, s_index,
                         document.sections[s_index].page))
        pending.clear()

    for s_index, section in enumerate(document.sections):
        text = section.text
        if not text.strip():
            continue
        size = len(text) + len(section.heading) + 1
        if merge_sections and len(text) <= max_chars:
            merged = sum(len(t) + len(h) + 1 for _, h, t in pending) + size
            alone = 0 < alone_chars <= len(text)
            if pending and (alone or merged > max_chars or document.sections[pending[0][0]].page != section.page):
                flush()  # full, or another page: a chunk's page is where all of it is
            pending.append((s_index, section.heading, text))
            if alone:
                flush()
            continue
        flush()
        for start, end, overlap in _split(text, max_chars, overlap_chars):
            out.append(
                Chunk(
                    doc_id=document.id,
                    n=len(out),
                    heading=section.heading,
                    text=text[start:end],
                    overlap=overlap,
                    section=s_index,
                    page=section.page,
                )
            )
    flush()
    if not out:
        out.append(Chunk(doc_id=document.id, n=0, heading="", text=document.title))
    return out
