"""gateway.ops.evaluate: the eval table's rows per question set and style (the runs themselves are
`make eval`)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from gateway.core.config import parse_config
from gateway.ops.evaluate import (
    HYBRID_MODEL,
    _rows,
    _tree_cpu_seconds,
    default_corpora,
    doc_id_of,
    hybrid_settings,
    hybrid_toml,
    table,
)
from gateway.ops.evaluation import EvalQuery, QueryScore


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


def test_default_corpora_add_laws_and_the_offtopic_set_on_each_docs_and_laws_route() -> None:
    cmrc, tidb, laws = default_corpora()
    assert [s.path.name for s in cmrc.sets] == ["queries.jsonl"]
    assert [(s.path.name, s.first, s.offtopic) for s in tidb.sets] == [
        ("queries.jsonl", 20, False), ("queries.colloquial.jsonl", 0, False), ("queries.dev.jsonl", 0, True)]
    assert [(s.path.parent.name, s.offtopic) for s in laws.sets] == [("laws-cn", False), ("offtopic", True)]
    assert all(p.exists() for c in (cmrc, tidb, laws) for p in (c.docs, *(s.path for s in c.sets)))
    assert doc_id_of("a/b.md#12") == "a/b.md" and doc_id_of("cmrc-1") == "cmrc-1"


def test_tree_cpu_seconds_counts_this_process() -> None:
    before = _tree_cpu_seconds(os.getpid())
    sum(i * i for i in range(2_000_000))
    assert _tree_cpu_seconds(os.getpid()) > before


def test_the_hybrid_column_is_served_by_a_valid_dense_table_and_reports_its_own_latency(tmp_path: Path) -> None:
    dense = hybrid_settings(HYBRID_MODEL)
    data = tomllib.loads('[indexes]\ndir = "indexes"\n' + hybrid_toml("tidb-docs-cn", dense))
    assert parse_config(data, base_dir=tmp_path, env={}).dense["tidb-docs-cn"] == dense
    lexical = [_score("colloquial", 1.0, 1.0), _score("keyword", 0.0, 0.0)]
    rows = _rows("tidb", "colloquial set", {"lexical": lexical, "hybrid": lexical, "bm25s": lexical}, [1.0, 3.0],
                 0.5, (lexical, [10.0, 30.0], 7.5))
    assert rows[0].hybrid_latencies == [10.0, 30.0] and rows[0].hybrid_cpu_ms == 7.5
    assert rows[2].hybrid_latencies == [30.0]
    assert "| 20.0 / 30.0 | 7.50 |" in table(rows)  # median of 10 and 30, p99


def test_an_offtopic_row_shows_only_the_share_answered() -> None:
    off = [QueryScore(EvalQuery("o1", "天气", (), (), "offtopic"), 0.0, 0.0, 3),
           QueryScore(EvalQuery("o2", "红烧肉", (), (), "offtopic"), 0.0, 0.0, 0)]
    [row] = _rows("laws-cn", "off-topic", {"lexical": off, "hybrid": off, "bm25s": off}, [1.0, 2.0], 0.1,
                  offtopic=True)
    assert row.offtopic and row.ahead and row.scores["lexical"].answered == 0.5
    assert "| laws-cn | off-topic | 2 | — | — | — | — | — | — | 0.5000 | 0.5000 |" in table([row])
