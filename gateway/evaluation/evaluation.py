"""Retrieval quality metrics and the bm25s baseline, shared by tests and `kbgate eval` (moved
here from indexes/, which holds serving and ingest code only).

Rationale: docs/design-notes.md, "gateway/evaluation/evaluation.py".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from indexes.analysis import normalize
from indexes.types import Document

__all__ = [
    "Bm25sBaseline",
    "EvalQuery",
    "EvalResult",
    "QueryScore",
    "Ranked",
    "answer_hit_at_k",
    "evaluate",
    "load_queries",
    "mrr_at_k",
    "score_queries",
    "summarize",
]

_ANSWER_NOISE = re.compile(r"[\s`*]+")


def _answer_form(text: str) -> str:
    return _ANSWER_NOISE.sub("", normalize(text, exact=True))


def mrr_at_k(ranked_doc_ids: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """Reciprocal rank (1-based) of the first relevant id among the first k distinct ids."""
    seen: list[str] = []
    for doc_id in ranked_doc_ids:
        if doc_id in seen:
            continue
        seen.append(doc_id)
        if len(seen) > k:
            break
        if doc_id in relevant:
            return 1.0 / len(seen)
    return 0.0


def answer_hit_at_k(texts: Sequence[str], answers: Iterable[str], k: int = 5) -> float:
    """1.0 when any answer occurs in any of the first k texts (normalized, see module doc)."""
    wanted = [a for a in (_answer_form(x) for x in answers) if a]
    if not wanted:
        return 0.0
    window = [_answer_form(t) for t in texts[:k]]
    return 1.0 if any(a in t for a in wanted for t in window) else 0.0


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One judged query: relevant document ids and answer strings.

    style: how the question is written, when the set says ("colloquial", "paraphrase",
    "keyword" in tidb-docs-cn/queries.colloquial.jsonl), else ''.
    """

    query_id: str
    query: str
    relevant_ids: tuple[str, ...]
    answers: tuple[str, ...]
    style: str = ""


@dataclass(frozen=True, slots=True)
class QueryScore:
    """One query's figures: mrr (reciprocal rank of the first relevant document, 0 if none
    in the first k), hit (1.0 when an answer is in the first k texts, else 0.0) and results
    (how many results the answer held); for a search that gives Summaries (`Ranked` triples),
    in_summaries / in_first (1.0 when an answer is in the first 5 / the first Summary) and the
    Summaries' lengths in characters; None / () otherwise."""

    query: EvalQuery
    mrr: float
    hit: float
    results: int = 0
    in_summaries: float | None = None
    in_first: float | None = None
    summary_chars: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EvalResult:
    """Averages over `queries` queries: mrr (MRR@k docs), answer_hit (answer-hit@k texts),
    answered (share of queries answered with at least one result); where Summaries were given,
    in_summaries, in_first (shares) and mean_summary (characters per Summary)."""

    queries: int
    mrr: float
    answer_hit: float
    answered: float = 0.0
    in_summaries: float | None = None
    in_first: float | None = None
    mean_summary: float | None = None


def load_queries(path: Path) -> list[EvalQuery]:
    """queries.jsonl → EvalQuery list. Accepts `relevant_ids` (CMRC) or `relevant_paths`
    (TiDB docs, paths relative to the docs folder = Markdown document ids)."""
    out: list[EvalQuery] = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            rec: dict[str, Any] = json.loads(line)
            relevant = rec.get("relevant_ids") or rec.get("relevant_paths") or []
            out.append(EvalQuery(str(rec.get("query_id", len(out))), rec["query"],
                                 tuple(relevant), tuple(rec.get("answers") or ()),
                                 str(rec.get("style") or "")))
    return out


RankedTexts = list[tuple[str, str]]
"""A ranked result list: (doc_id, text shown to the reader) per item, best first."""
Ranked = list[tuple[str, str, str]]
"""A served result list: (doc_id, everything shown, its Summary) per item, best first."""


def evaluate(
    search: Callable[[str], RankedTexts],
    queries: Sequence[EvalQuery],
    *,
    mrr_k: int = 10,
    answer_k: int = 5,
) -> EvalResult:
    """Run `search` on every query; MRR@mrr_k over doc ids, answer-hit@answer_k over texts."""
    return summarize(score_queries(search, queries, mrr_k=mrr_k, answer_k=answer_k))


def score_queries(
    search: Callable[[str], RankedTexts] | Callable[[str], Ranked],
    queries: Sequence[EvalQuery],
    *,
    mrr_k: int = 10,
    answer_k: int = 5,
    summaries: bool = False,
) -> list[QueryScore]:
    """Run `search` on every query, in order; one QueryScore each (see `evaluate`). With
    `summaries` (a search giving `Ranked` triples) each is also scored on its Summaries (answer_k
    of them, and the first)."""
    out: list[QueryScore] = []
    for q in queries:
        ranked: Sequence[tuple[str, ...]] = search(q.query)
        score = QueryScore(q, mrr_at_k([r[0] for r in ranked], q.relevant_ids, mrr_k),
                           answer_hit_at_k([r[1] for r in ranked], q.answers, answer_k), len(ranked))
        if summaries:
            given = [r[2] for r in ranked]
            score = replace(score, in_summaries=answer_hit_at_k(given, q.answers, answer_k),
                            in_first=answer_hit_at_k(given, q.answers, 1),
                            summary_chars=tuple(len(s) for s in given[:answer_k]))
        out.append(score)
    return out


def summarize(scores: Sequence[QueryScore]) -> EvalResult:
    """Averages of `scores` (0.0 for none)."""
    n = max(1, len(scores))
    result = EvalResult(len(scores), sum(s.mrr for s in scores) / n, sum(s.hit for s in scores) / n,
                        sum(1 for s in scores if s.results) / n)
    if any(s.in_summaries is not None for s in scores):
        lengths = [c for s in scores for c in s.summary_chars]
        result = replace(result, in_summaries=sum(s.in_summaries or 0.0 for s in scores) / n,
                         in_first=sum(s.in_first or 0.0 for s in scores) / n,
                         mean_summary=sum(lengths) / len(lengths) if lengths else 0.0)
    return result


def _jieba_tokens(text: str) -> list[str]:
    import rjieba

    return [t for t in rjieba.cut(normalize(text, exact=True)) if t.strip()]


class Bm25sBaseline:
    """bm25s.BM25 over fixed `chunk_chars`-character chunks of each document's text.

    documents: the same Documents as indexed (title line first, then Document.text).
    search(query, k) → [(doc_id, chunk_text)] for the top k chunks, best first.
    Raises ImportError when bm25s (dev dependency) is not installed.
    """

    def __init__(self, documents: Iterable[Document], chunk_chars: int = 300) -> None:
        import bm25s

        self._doc_ids: list[str] = []
        self._texts: list[str] = []
        for doc in documents:
            text = f"{doc.title}\n{doc.text}" if doc.title else doc.text
            for start in range(0, max(len(text), 1), chunk_chars):
                self._doc_ids.append(doc.id)
                self._texts.append(text[start : start + chunk_chars])
        self._vocab: dict[str, int] = {}
        corpus_ids = [
            [self._vocab.setdefault(t, len(self._vocab)) for t in _jieba_tokens(text)]
            for text in self._texts
        ]
        self._tokenized = bm25s.tokenization.Tokenized
        self._bm25 = bm25s.BM25()
        self._bm25.index(self._tokenized(ids=corpus_ids, vocab=self._vocab), show_progress=False)

    def search(self, query: str, k: int) -> RankedTexts:
        ids = [self._vocab[t] for t in _jieba_tokens(query) if t in self._vocab]
        if not ids or k <= 0:
            return []
        k = min(k, len(self._texts))
        found, _scores = self._bm25.retrieve(
            self._tokenized(ids=[ids], vocab=self._vocab), k=k, show_progress=False
        )
        return [(self._doc_ids[i], self._texts[i]) for i in found[0].tolist()]
