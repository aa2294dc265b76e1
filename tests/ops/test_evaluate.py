"""gateway.ops.evaluate: the eval table's rows per question set and style (the runs themselves are
`make eval`)."""

from __future__ import annotations

import os

from gateway.ops.evaluate import _rows, _tree_cpu_seconds, default_corpora, doc_id_of, table
from indexes.evaluation import EvalQuery, QueryScore


def _score(style: str, mrr: float, hit: float) -> QueryScore:
    return QueryScore(EvalQuery("q", "问题", ("a",), ("答",), style), mrr, hit)


def test_rows_per_set_then_per_style_with_an_empty_hybrid_slot() -> None:
    lexical = [_score("colloquial", 1.0, 1.0), _score("keyword", 0.5, 0.0), _score("colloquial", 0.0, 1.0)]
    bm25s = [_score("colloquial", 0.5, 0.0), _score("keyword", 0.5, 1.0), _score("colloquial", 0.0, 0.0)]
    rows = _rows("tidb", "colloquial set", {"lexical": lexical, "bm25s": bm25s}, [1.0, 2.0, 3.0], 0.25)
    assert [(r.style, r.queries) for r in rows] == [("", 3), ("colloquial", 2), ("keyword", 1)]
    assert rows[0].scores["lexical"].mrr == 0.5 and rows[1].scores["lexical"].mrr == 0.5
    assert rows[1].scores["bm25s"].answer_hit == 0.0 and rows[2].scores["bm25s"].answer_hit == 1.0
    assert rows[1].latencies == [1.0, 3.0] and rows[1].cpu_ms is None
    assert rows[0].ahead  # 0.5 > 0.333 MRR and 0.667 > 0.333 answer-hit
    assert not rows[2].ahead  # keyword: MRR 0.5 = 0.5
    text = table(rows)
    assert "| tidb | colloquial set | 3 | 0.5000 | — | 0.3333 |" in text
    assert "↳ keyword" in text and text.count("\n") == len(rows) + 1


def test_default_corpora_use_the_first_20_tidb_questions_and_the_colloquial_set() -> None:
    cmrc, tidb = default_corpora()
    assert [s.path.name for s in cmrc.sets] == ["queries.jsonl"]
    assert [(s.path.name, s.first) for s in tidb.sets] == [("queries.jsonl", 20), ("queries.colloquial.jsonl", 0)]
    assert doc_id_of("a/b.md#12") == "a/b.md" and doc_id_of("cmrc-1") == "cmrc-1"


def test_tree_cpu_seconds_counts_this_process() -> None:
    before = _tree_cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert _tree_cpu_seconds(os.getpid()) > before
