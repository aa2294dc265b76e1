"""Fusion of the BM25 ranking and the nearest-neighbour ranking into one list.

Rationale: docs/design-notes.md, "indexes/dense/fusion.py".
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from .. import relevance

__all__ = ["calibrated", "mix", "rrf"]

K = TypeVar("K", bound=Hashable)


def rrf(lexical: Sequence[tuple[K, float]], dense: Sequence[tuple[K, float]], *, k: int = 60,
        lexical_weight: float = 1.0, dense_weight: float = 1.0) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of two ranked lists of (key, score), best first.

    Scores are ignored (only the order counts). Returns (key, fused score) best first; a key
    present in both lists gets both terms. k >= 1; weights >= 0.
    """
    fused: dict[K, float] = {}
    for weight, ranked in ((lexical_weight, lexical), (dense_weight, dense)):
        if weight <= 0:
            continue
        for rank, (key, _score) in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda kv: -kv[1])


def _minmax(ranked: Sequence[tuple[K, float]]) -> dict[K, float]:
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    lo, hi = min(scores), max(scores)
    span = hi - lo
    return {key: (s - lo) / span if span > 0 else 1.0 for key, s in ranked}


def mix(lexical: Sequence[tuple[K, float]], dense: Sequence[tuple[K, float]], *,
        lexical_weight: float = 1.0, dense_weight: float = 1.0) -> list[tuple[K, float]]:
    """Weighted sum of min-max normalised scores (each list scaled to 0..1 on its own; a
    list whose scores are all equal scales to 1). Returns (key, fused score) best first."""
    fused: dict[K, float] = {}
    for weight, ranked in ((lexical_weight, lexical), (dense_weight, dense)):
        for key, s in _minmax(ranked).items():
            fused[key] = fused.get(key, 0.0) + weight * s
    return sorted(fused.items(), key=lambda kv: -kv[1])


def calibrated(lexical: Sequence[tuple[K, float]], cosines: Mapping[K, float], *, ideal: float,
               lexical_weight: float = 0.8, dense_weight: float = 0.2,
               line: tuple[float, float] = (relevance.DENSE_ZERO, relevance.DENSE_ONE)) -> list[tuple[K, float]]:
    """(key, lexical_weight × bm25 / ideal + dense_weight × relevance.dense(cosine)) for every key
    of `lexical` ((key, BM25 score), best first) and of `cosines` (key → cosine of every candidate:
    the nearest neighbours and BM25's candidates alike; a key without one scores 0 on that side),
    best first. ideal: the question's `indexes.search.ideal_score` (<= 0: lexical side 0). line:
    the index's cosine line (`indexes.dense.calibration.effective`)."""
    fused: dict[K, float] = {key: lexical_weight * relevance.lexical(score, ideal) for key, score in lexical}
    for key, cos in cosines.items():
        fused[key] = fused.get(key, 0.0) + dense_weight * relevance.dense(cos, line)
    return sorted(fused.items(), key=lambda kv: -kv[1])
