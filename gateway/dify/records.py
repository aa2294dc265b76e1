"""Hits as Dify reads them: `{"content", "score", "title", "metadata"}` records.

Rationale: docs/design-notes.md, "gateway/dify/records.py".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from indexes.types import Hit

__all__ = ["document_id", "record", "records", "score"]


def score(hit: Hit) -> float:
    """The record score of `hit`: its relevance clamped to 0..1, rounded to 6 places."""
    return round(min(1.0, max(0.0, hit.relevance)), 6)


def document_id(hit: Hit, index: str) -> str:
    """The hit's document id; a stable 'kbgate-' digest of (index, hit id, title) when the
    document has none (no reader makes one, but a record must never lack it)."""
    if hit.doc_id:
        return hit.doc_id
    digest = hashlib.sha256(f"{index}\x00{hit.id}\x00{hit.title}".encode()).hexdigest()
    return f"kbgate-{digest[:24]}"


def record(hit: Hit, score: float, index: str, *, snippet: bool = False) -> dict[str, Any]:
    """One Dify record for `hit` with its record `score` (see the module docstring); content: the
    hit's snippet (`indexes.passages`) with `snippet`, else its content."""
    doc_id = document_id(hit, index)
    meta: dict[str, Any] = {name: list(v) if isinstance(v, tuple) else v for name, v in hit.metadata}
    meta["document_id"] = doc_id
    for name, value in (("path", hit.path), ("url", hit.url), ("dataset", hit.dataset),
                        ("publish_time", hit.publish_time)):
        if value is not None and value != "":
            meta[name] = value
    content = hit.summary if snippet and hit.summary else hit.content
    return {"content": content or hit.title, "score": score, "title": hit.title or doc_id, "metadata": meta}


def records(hits: Sequence[Hit], index: str, *, threshold: float, snippet: bool = False) -> list[dict[str, Any]]:
    """Records of `hits` (best first) whose score (`score`) is at least `threshold`; with `snippet`
    (a route that sets summary_chars), each record's content is the hit's snippet, not its content."""
    scored = [(score(h), h) for h in hits]
    return [record(h, s, index, snippet=snippet) for s, h in scored if s >= threshold]
