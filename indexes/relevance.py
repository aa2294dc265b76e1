"""One relevance scale, 0..1, for every hit of every index kind (issue 17).

Raw scores have no common scale: BM25 grows with the length of the question and differs
per index, a cosine lives in its model's band, a fused score depends on the fusion rule. The
relevance of a hit is computed here, from its raw scores (`indexes.types.Scores`), so that a
floor, a Dify `score_threshold` or a merge of two indexes compares like with like:

- lexical: `share = bm25 / ideal`, where `ideal` is what the same query scores on a chunk
  holding each of its terms once at average length in a document whose title holds its title
  terms (`indexes.search.ideal_score`: the query's IDF mass). It is the matched share of the
  question's IDF mass, read as BM25 reads it: a chunk that repeats a matched term scores
  more than once for it (BM25 saturates at (k1 + 1) = 2.2 times), so share can pass 1; it is
  clamped. A question whose rare words the corpus never mentions has most of its mass
  unmatched, so its best hit has a low share, whatever its raw BM25.
- dense: `(cos - DENSE_ZERO) / (DENSE_ONE - DENSE_ZERO)` clamped to 0..1, a line through the
  embedded model's (use-multilingual-v3) cosines read off the shared sets: on laws-cn, the
  nearest chunk of an off-topic question lies at 0.13–0.29 (median 0.22), that of an on-topic
  one at 0.24–0.67 (median 0.48, the top at 0.67); so 0.25 → 0 and 0.65 → 1.
- hybrid: `LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) × dense`; a chunk one side did not
  find gets 0 from it. The weights are not the fusion's (0.7 / 0.3 ranks, `indexes.dense.fusion`):
  as a judge of "is this about the question at all", the cosine separates better than the
  matched IDF share (off-topic questions match everyday words of a corpus: 今天, 怎么样, 时间),
  so it weighs 0.7 here. Measured on laws-cn dev + off-topic, floor 0.15 (python over a hybrid
  index, 2026-12-01): lexical weight 0.3 → off-topic answered 0%, answer-hit@5 0.650; 0.5 →
  20%, 0.650; 0.7 → 55%, 0.633 (no floor: 100%, 0.700).
- rerank: the reranker's own relevance where one ran (`Scores.rerank`), clamped to 0..1: a
  cross-encoder reads question and chunk together and is the better judge.

The scale is monotonic in BM25 within one lexical search, so dropping hits under a floor
keeps a prefix of the ranking. Pure functions; nothing here raises.
"""

from __future__ import annotations

from .types import Scores

__all__ = ["DENSE_ONE", "DENSE_ZERO", "LEXICAL_SHARE", "dense", "hybrid", "lexical", "of", "raw_floor"]

DENSE_ZERO = 0.25
DENSE_ONE = 0.65
"""Cosines of the embedded model (use-multilingual-v3) mapped to relevance 0 and 1."""
LEXICAL_SHARE = 0.3
"""Weight of the lexical relevance in a hybrid hit's relevance (module doc)."""


def _clamp(x: float) -> float:
    return 0.0 if x != x or x < 0.0 else 1.0 if x > 1.0 else x  # x != x: NaN


def lexical(bm25: float, ideal: float) -> float:
    """bm25 / ideal clamped to 0..1 (module doc); 0.0 when ideal <= 0 (nothing to match)."""
    return _clamp(bm25 / ideal) if ideal > 0 else 0.0


def raw_floor(floor: float, ideal: float) -> float:
    """The BM25 score under which a hit of this search has a relevance under `floor` (the
    inverse of `lexical`): hits may be dropped on raw scores before any stored chunk is read."""
    return floor * ideal


def dense(cosine: float) -> float:
    """A cosine similarity (-1..1) on the 0..1 scale (module doc)."""
    return _clamp((cosine - DENSE_ZERO) / (DENSE_ONE - DENSE_ZERO))


def hybrid(lexical_relevance: float, cosine: float | None) -> float:
    """A hybrid hit's relevance from its lexical relevance (0 when BM25 did not find it) and its
    cosine (None when the nearest neighbours did not include it: dense side 0)."""
    d = dense(cosine) if cosine is not None else 0.0
    return _clamp(LEXICAL_SHARE * lexical_relevance + (1.0 - LEXICAL_SHARE) * d)


def of(scores: Scores, computed: float) -> float:
    """The relevance to show: the reranker's (clamped) when one ran, else `computed`."""
    return _clamp(scores.rerank) if scores.rerank is not None else _clamp(computed)
