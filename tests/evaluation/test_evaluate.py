"""gateway.evaluation.evaluate: the shared corpora and question sets, and the tables the served columns
(hybrid, rerank) are configured with (the runs themselves are `make eval`)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from gateway.core.config import parse_config
from gateway.evaluation.cpu import tree_cpu_seconds as _tree_cpu_seconds
from gateway.evaluation.eval_table import fallbacks_table
from gateway.evaluation.evaluate import (
    HYBRID_MODEL,
    RERANK_CANDIDATES,
    Corpus,
    QuerySet,
    _evaluate_one,
    _standin,
    default_corpora,
    doc_id_of,
    hybrid_settings,
    hybrid_toml,
    lexical_toml,
    rerank_toml,
)
from gateway.ops.processes import free_port
from indexes.dense.config import DenseChoices


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


def test_the_hybrid_and_rerank_columns_are_served_by_valid_tables(tmp_path: Path) -> None:
    dense = hybrid_settings(HYBRID_MODEL)
    data = tomllib.loads('[indexes]\ndir = "indexes"\n' + hybrid_toml("tidb-docs-cn", dense)
                        + rerank_toml("tidb-docs-cn", "http://127.0.0.1:9"))
    cfg = parse_config(data, base_dir=tmp_path, env={})
    assert cfg.dense["tidb-docs-cn"] == dense
    rerank = cfg.rerank["tidb-docs-cn"]
    assert (rerank.provider, rerank.url, rerank.candidates) == ("cohere", "http://127.0.0.1:9/v1/rerank",
                                                                RERANK_CANDIDATES)
    # deadlines a loaded machine does not miss, and breakers a few late answers do not open
    assert (dense.query_timeout_ms, dense.breaker_failures) == (10_000, 100)
    assert (rerank.timeout_ms, rerank.breaker_failures) == (10_000, 100)


def test_the_lexical_and_rerank_columns_serve_the_index_lexically_though_it_holds_vectors(tmp_path: Path) -> None:
    # The eval's one index is built with the hybrid column's vectors (a dense/ folder): without
    # dense = "none" the hybrid default would serve the lexical column hybrid.
    (tmp_path / "indexes" / "tidb-docs-cn" / "dense").mkdir(parents=True)
    data = tomllib.loads('[indexes]\ndir = "indexes"\n' + lexical_toml("tidb-docs-cn")
                         + rerank_toml("tidb-docs-cn", "http://127.0.0.1:9"))
    cfg = parse_config(data, base_dir=tmp_path, env={})
    assert DenseChoices.of(cfg.dense).for_index("tidb-docs-cn", tmp_path / "indexes" / "tidb-docs-cn") is None
    assert "tidb-docs-cn" in cfg.rerank


def test_a_question_the_callback_refuses_is_reported_once_per_corpus(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # cmrc2018 holds one empty question: each served column (lexical, rerank here, hybrid in
    # make eval) is refused it, and the run says so once
    docs, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "title": t, "content": c}, ensure_ascii=False) + "\n"
                            for i, (t, c) in enumerate([("密钥", "如何轮换密钥：先添加新密钥。"),
                                                        ("退款", "购买后七天内可以无理由退款。")])), "utf-8")
    queries.write_text("".join(json.dumps({"query_id": str(i), "query": q, "relevant_ids": ["d0"]},
                                          ensure_ascii=False) + "\n" for i, q in enumerate(["如何轮换密钥", ""])),
                       "utf-8")
    with _standin(True) as reranker:
        rows, _, _ = _evaluate_one(Corpus("tiny", docs, (QuerySet("q", queries),)), 0, tmp_path / "work",
                                   reranker=reranker)
    assert {"lexical", "rerank"} <= set(rows[0].scores)
    said = [line for line in capsys.readouterr().err.splitlines() if "refused by the callback contract" in line]
    assert [(s.fallbacks["lexical"], s.fallbacks["rerank"]) for s in rows[:1]] == [(None, 0)]  # every call reranked
    assert said == ["tiny: 1 queries refused by the callback contract (empty or too long); they score 0 for both "
                    "systems"]


def test_searches_a_column_answers_without_its_stage_are_counted_per_set(tmp_path: Path) -> None:
    # a rerank column whose reranker does not answer (nothing listens on the port): every
    # question's call fails and is counted, per set, so the run can say it is not comparable
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "title": t, "content": c}, ensure_ascii=False) + "\n"
                            for i, (t, c) in enumerate([("密钥", "如何轮换密钥：先添加新密钥。"),
                                                        ("退款", "购买后七天内可以无理由退款。")])), "utf-8")
    sets = []
    for name, qs in (("a", ["如何轮换密钥", "退款要几天"]), ("b", ["轮换密钥"])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"query_id": str(i), "query": q, "relevant_ids": ["d0"]},
                                           ensure_ascii=False) + "\n" for i, q in enumerate(qs)), "utf-8")
        sets.append(QuerySet(name, path))
    dead = f"http://127.0.0.1:{free_port()}"
    rows, _, _ = _evaluate_one(Corpus("tiny", docs, tuple(sets)), 0, tmp_path / "work", reranker=(dead, os.getpid()))
    assert [(r.label, r.fallbacks["rerank"]) for r in rows] == [("a", 2), ("b", 1)]
    assert "NOT COMPARABLE: 3 searches fell back" in fallbacks_table(rows)
