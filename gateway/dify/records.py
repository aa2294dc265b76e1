"""Hits as Dify reads them: `{"content", "score", "title", "metadata"}` records.

Score. Dify compares `score` with its `score_threshold` in 0..1 (a cosine similarity in its own
knowledge bases); our ranking score s (BM25 plus title weights, indexes.search) is unbounded
and grows with the length of the question. A record's score is

    score = s / (s₁ + K)        s₁: the best hit's s in this answer; K: [dify] score_k (40)

so the best record gets s₁ / (s₁ + K) — 0.5 when it scores K, towards 1 for strong matches —
and every other one that share of it scaled by s / s₁. It lies in 0..1 and is monotonic
within one answer (records come best first, with non-increasing scores). K = 40 was read off
the eval questions of ../shared/corpora (2026-12): the best hit scores about 74 at the median
(40–47 at the 10th percentile), a wrong page at the fifth place 16–55; so a threshold of 0.5
keeps the best page for about nine questions in ten and drops most pages that only share
common words with the question. The threshold is applied to these scores, after the search,
and never lowered to fill the list.

Metadata is always an object with a non-empty string `document_id` (Dify ≥ 1.13 fails the
workflow's retrieval node without one; issues #32585, #32611), then `path`, `url`,
`dataset`, `publish_time` (unix seconds) when known, and the document's kept metadata
fields (indexes.ingest.metadata).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from indexes.types import Hit

__all__ = ["document_id", "normalize", "record", "records"]


def normalize(score: float, best: float, k: float) -> float:
    """s / (s₁ + K), clamped to 0..1 and rounded to 6 places (a monotonic map for fixed s₁)."""
    denominator = best + k
    if denominator <= 0:
        return 0.0
    return round(min(1.0, max(0.0, score / denominator)), 6)


def document_id(hit: Hit, index: str) -> str:
    """The hit's document id; a stable 'kbgate-' digest of (index, hit id, title) when the
    document has none (no reader makes one, but a record must never lack it)."""
    if hit.doc_id:
        return hit.doc_id
    digest = hashlib.sha256(f"{index}\x00{hit.id}\x00{hit.title}".encode()).hexdigest()
    return f"kbgate-{digest[:24]}"


def record(hit: Hit, score: float, index: str) -> dict[str, Any]:
    """One Dify record for `hit` with its normalized `score` (see the module docstring)."""
    doc_id = document_id(hit, index)
    meta: dict[str, Any] = {name: list(v) if isinstance(v, tuple) else v for name, v in hit.metadata}
    meta["document_id"] = doc_id
    for name, value in (("path", hit.path), ("url", hit.url), ("dataset", hit.dataset),
                        ("publish_time", hit.publish_time)):
        if value is not None and value != "":
            meta[name] = value
    return {"content": hit.content or hit.title, "score": score, "title": hit.title or doc_id, "metadata": meta}


def records(hits: Sequence[Hit], index: str, *, k: float, threshold: float) -> list[dict[str, Any]]:
    """Records of `hits` (best first) whose normalized score is at least `threshold`."""
    if not hits:
        return []
    best = max(h.score for h in hits)
    scored = [(normalize(h.score, best, k), h) for h in hits]
    return [record(h, score, index) for score, h in scored if score >= threshold]
