"""Fusion of the BM25 ranking and the nearest-neighbour ranking into one list.

Three rules, chosen per index (`DenseConfig.fusion`):
- "calibrated" (the default, issue 17): a weighted sum of scores on fixed scales, not rescaled
  per question: `lexical_weight × BM25 / ideal + dense_weight × relevance.dense(cosine)`, where
  BM25 / ideal is the share of the question's IDF mass a chunk matches (`indexes.relevance.lexical`,
  not clamped: repeats and title matches pass 1) and the cosine is mapped through the model's
  calibration line (0.30 → 0, 0.65 → 1). Every candidate, BM25's and the neighbours', gets both
  terms: the cosine of a BM25 candidate is read from the stored vectors. Why: min-max
  normalisation ("mix") stretches whatever the question found to 0..1, so a question whose BM25
  candidates are all weak lets a weak lexical margin decide as much as a strong one; on fixed
  scales a strong lexical match keeps its lead and a weak one lets the model decide. Measured
  against mix 0.7/0.3 over every shared set, wins/losses per question (docs/hybrid-retrieval.md).
- "rrf", reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
  score(c) = Σ_lists weight / (k + rank(c)), rank 1-based, absent → no term. It needs no
  score calibration: BM25 scores have no fixed scale (they grow with query length and
  vary per index) and cosine similarities of different models live in different bands, so
  a rank-based rule keeps working when either changes. k = 60 is the paper's value.
- "mix", a weighted sum of min-max normalised scores (BM25 over the lexical list, cosine
  over the dense list; absent → 0). Uses score gaps that RRF ignores, but must be tuned
  per model and corpus.
All are pure functions of their inputs; ties keep the earlier-seen key first.

"mix" at 0.7 / 0.3 was the default until issue 17: with the embedded model, RRF at weights 1 to
0.3 cost cmrc2018 (questions that copy the passage's wording, where BM25 is nearly always right
and sure of it) 0.05–0.08 MRR, because it gives the dense list's top rank as much say as BM25's
most confident one. docs/hybrid-retrieval.md has the figures; RRF stays available for stronger
served models.
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
