"""What one indexed chunk holds: the revision of its document and its Tantivy fields.

`chunk_fields` is the pure, picklable step of ingest (chunking plus the Python-side
analysis: folding, rjieba), so `indexes.writer` can run it in worker processes.
The field names are those of `indexes.schema.build_schema`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from . import metadata
from .analysis import fold_positions, index_text, normalize
from .ingest.chunking import chunk
from .schema import doc_key
from .types import Chunk, Document

__all__ = ["PAGE", "chunk_fields", "document_revision"]

PAGE = "page"
"""The metadata name a chunk's page (`Chunk.page`: PDF page, PPTX slide) is served under, on
that chunk only (a hit's metadata); not a filter term."""


def document_revision(doc: Document) -> str:
    """SHA-256 hex over everything indexed for `doc` (title, sections, metadata).

    Any change to text or metadata (e.g. qa_visible) changes the revision, so an
    unchanged revision means the indexed chunks can be kept as they are. Section pages (PDF,
    PPTX) count only when a document has them, so documents without pages keep the revisions
    they had before pages existed.
    """
    payload: dict[str, Any] = {
        "title": doc.title,
        "sections": [[s.heading, s.text] for s in doc.sections],
        "url": doc.url,
        "summary": doc.summary,
        "publish_time": doc.publish_time,
        "cover": None if doc.cover_image is None else [
            doc.cover_image.url, doc.cover_image.height, doc.cover_image.width],
        "path": doc.path,
        "dataset": doc.dataset,
        "qa_visible": doc.qa_visible,
        "metadata": [[n, list(v) if isinstance(v, tuple) else v] for n, v in doc.metadata],
    }
    if any(s.page is not None for s in doc.sections):
        payload["pages"] = [s.page for s in doc.sections]
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def chunk_fields(doc: Document, revision: str, chunk_chars: int) -> list[dict[str, Any]]:
    """The stored and analysed fields of each chunk of `doc`, as plain dicts (field → value).

    doc: the document; revision: `document_revision(doc)`; chunk_chars: the chunk size in
    characters (`indexes.ingest.chunking.chunk`). Pure and picklable, so ingest can run it in
    worker processes: this analysis (folding, rjieba) is where indexing spends its Python time.
    Each text is folded once: a chunk's text, and each section's heading trail once for all
    of its chunks.
    """
    chunks: list[Chunk] = chunk(doc, max_chars=chunk_chars)
    title = index_text(normalize(doc.title))
    title_words = f"{title.words} {title.latin}" if title.latin else title.words
    cover = doc.cover_image
    common: dict[str, Any] = {
        "doc_id": doc.id,
        "doc_key": doc_key(doc.id),
        "title": doc.title,
        "n_chunks": len(chunks),
        "revision": revision,
        "path": doc.path,
        "dataset": doc.dataset,
        "qa_visible": 1 if doc.qa_visible else 0,
        "title_words": title_words,
        "title_chars": title.runs,
        **metadata.index_terms(doc),
    }
    if doc.metadata:
        common["metadata"] = metadata.encode(doc.metadata)
    paged = any(c.page is not None for c in chunks)
    if doc.url:
        common["url"] = doc.url
    if doc.publish_time is not None:
        common["publish_time"] = doc.publish_time
    if cover is not None:
        common["cover_url"] = cover.url
        if cover.height is not None:
            common["cover_height"] = cover.height
        if cover.width is not None:
            common["cover_width"] = cover.width
    headings: dict[int, str] = {}  # section → its folded heading trail and heading
    out: list[dict[str, Any]] = []
    for c in chunks:
        extra: dict[str, Any] = {}
        text = normalize(c.text)
        # Excerpts locate query terms in text.lower() unless a fold that keeps positions
        # differs from it (Traditional characters, full-width letters): then it is stored.
        lower = c.text.lower()
        if text != lower:
            fold = fold_positions(c.text)
            if len(fold) == len(c.text) and fold != lower:
                extra["text_fold"] = fold
        # The headings above the chunk's own (e.g. the "## 配置" of a "### 参数" section) are
        # analysed with it: the section's place in the page is part of what it is about.
        head = headings.get(c.section)
        if head is None:
            trail = doc.sections[c.section].trail if c.section < len(doc.sections) else ""
            head = headings[c.section] = normalize("\n".join(p for p in (trail, c.heading) if p))
        body = index_text(f"{head}\n{text}" if head else text)
        if paged and c.page is not None:  # the page a chunk starts on, served with its metadata
            extra["metadata"] = metadata.encode(tuple(sorted({**dict(doc.metadata), PAGE: c.page}.items())))
        if c.n == 0:
            extra["doc_title_words"], extra["doc_title_chars"] = title_words, title.runs
            if doc.summary:
                extra["summary"] = doc.summary
            if doc.source:
                extra["source"] = doc.source
        out.append({  # extra last: a chunk's own metadata (its page) replaces the document's
            **common,
            "chunk_id": f"{doc.id}#{c.n}",
            "chunk": c.n,
            "overlap": c.overlap,
            "section": c.section,
            "heading": c.heading,
            "text": c.text,
            "body_words": body.words,
            "body_latin": body.latin,
            "body_chars": body.runs,
            **extra,
        })
    return out
