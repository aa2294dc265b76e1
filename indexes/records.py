"""What one indexed chunk holds: the revision of its document and its Tantivy fields.

`chunk_fields` is the pure, picklable step of ingest (chunking plus the Python-side
analysis: rjieba, bigrams, folding), so `indexes.writer` can run it in worker processes.
The field names are those of `indexes.schema.build_schema`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import metadata
from .analysis import index_tokens, normalize, normalize_positions
from .ingest.chunking import chunk
from .schema import doc_key
from .types import Chunk, Document

__all__ = ["chunk_fields", "document_revision"]


def document_revision(doc: Document) -> str:
    """SHA-256 hex over everything indexed for `doc` (title, sections, metadata).

    Any change to text or metadata (e.g. qa_visible) changes the revision, so an
    unchanged revision means the indexed chunks can be kept as they are.
    """
    payload = {
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
    raw = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def chunk_fields(doc: Document, revision: str, chunk_chars: int) -> list[dict[str, Any]]:
    """The stored and analysed fields of each chunk of `doc`, as plain dicts (field → value).

    doc: the document; revision: `document_revision(doc)`; chunk_chars: the chunk size in
    characters (`indexes.ingest.chunking.chunk`). Pure and picklable, so ingest can run it in
    worker processes: this analysis (rjieba, bigrams, folding) is where indexing spends its time.
    """
    chunks: list[Chunk] = chunk(doc, max_chars=chunk_chars)
    title = normalize(doc.title)
    title_words, title_grams = index_tokens(title)
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
        "title_bigrams": title_grams,
        "title_unigrams": title,
        **metadata.index_terms(doc),
    }
    if doc.metadata:
        common["metadata"] = [metadata.encode(doc.metadata)]
    if doc.url:
        common["url"] = doc.url
    if doc.summary:
        common["summary"] = [doc.summary.encode("utf-8")]
    if doc.publish_time is not None:
        common["publish_time"] = doc.publish_time
    if cover is not None:
        common["cover_url"] = cover.url
        if cover.height is not None:
            common["cover_height"] = cover.height
        if cover.width is not None:
            common["cover_width"] = cover.width
    out: list[dict[str, Any]] = []
    for c in chunks:
        fold = normalize_positions(c.text)
        keep_fold = fold != c.text and len(fold) == len(c.text)
        extra: dict[str, Any] = {"text_fold": [fold.encode("utf-8")]} if keep_fold else {}
        # The headings above the chunk's own (e.g. the "## 配置" of a "### 参数" section) are
        # analysed with it: the section's place in the page is part of what it is about.
        trail = doc.sections[c.section].trail if c.section < len(doc.sections) else ""
        body = normalize("\n".join(p for p in (trail, c.heading, c.text) if p))
        body_words, body_grams = index_tokens(body)
        if c.n == 0:
            extra["doc_title_words"], extra["doc_title_bigrams"] = title_words, title_grams
        out.append(dict(
            **common,
            chunk_id=f"{doc.id}#{c.n}",
            chunk=c.n,
            overlap=c.overlap,
            section=c.section,
            heading=c.heading,
            text=[c.text.encode("utf-8")],
            body_words=body_words,
            body_bigrams=body_grams,
            body_unigrams=body,
            **extra,
        ))
    return out
