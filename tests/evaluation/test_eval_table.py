"""gateway.evaluation.eval_table: `kbgate eval`'s rows per question set and style, its quality table and
its costs table."""

from __future__ import annotations

from gateway.evaluation.eval_table import Served, costs_table, fallbacks_table, rows, table
from gateway.evaluation.evaluation import EvalQuery, QueryScore


def _score(style: str, mrr: float, hit: float, results: int = 1) -> QueryScore:
    return QueryScore(EvalQuery("q", "问题", ("a",), ("答",), style), mrr, hit, results)


def test_rows_per_set_then_per_style_with_empty_slots_for_systems_not_run() -> None:
    lexical = [_score("colloquial", 1.0, 1.0), _score("keyword", 0.5, 0.0), _score("colloquial", 0.0, 1.0)]
    bm25s = [_score("colloquial", 0.5, 0.0), _score("keyword", 0.5, 1.0), _score("colloquial", 0.0, 0.0)]
    got = rows("tidb", "colloquial set", {"lexical": Served(lexical, [1.0, 2.0, 3.0], 0.25)}, bm25s)
    assert [(r.style, r.queries) for r in got] == [("", 3), ("colloquial", 2), ("keyword", 1)]
    assert got[0].scores["lexical"].mrr == 0.5 and got[1].scores["lexical"].mrr == 0.5
    assert got[1].scores["bm25s"].answer_hit == 0.0 and got[2].scores["bm25s"].answer_hit == 1.0
    assert got[1].latencies == {"lexical": [1.0, 3.0]} and got[1].cpu_ms == {}
    assert got[0].ahead  # 0.5 > 0.333 MRR and 0.667 > 0.333 answer-hit
    assert not got[2].ahead  # keyword: MRR 0.5 = 0.5
    text = table(got)
    # MRR lexical, hybrid (not run), rerank (not run), bm25s
    assert "| tidb | colloquial set | 3 | 0.5000 | — | — | 0.3333 |" in text
    assert "↳ keyword" in text and text.count("\n") == len(got) + 1


def test_costs_are_per_whole_set_and_served_system_with_the_standin_reranker_apart() -> None:
    scores = [_score("colloquial", 1.0, 1.0), _score("keyword", 0.0, 0.0)]
    served = {"lexical": Served(scores, [1.0, 3.0], 0.5), "hybrid": Served(scores, [10.0, 30.0], 7.5),
              "rerank": Served(scores, [100.0, 300.0], 2.0, reranker_cpu_ms=40.0)}
    got = rows("tidb", "colloquial set", served, scores)
    assert got[2].latencies["hybrid"] == [30.0] and got[2].latencies["rerank"] == [300.0]
    text = costs_table(got)
    assert text.count("\n") == 2  # header, rule, the whole set only
    row = "| tidb | colloquial set | 2 | 2.0 / 3.0 | 20.0 / 30.0 | 200.0 / 300.0 | 0.50 | 7.50 | 2.00 | 40.00 |"
    assert row in text


def test_an_offtopic_row_shows_only_the_share_answered() -> None:
    off = [QueryScore(EvalQuery("o1", "天气", (), (), "offtopic"), 0.0, 0.0, 3),
           QueryScore(EvalQuery("o2", "红烧肉", (), (), "offtopic"), 0.0, 0.0, 0)]
    [row] = rows("laws-cn", "off-topic", {"lexical": Served(off, [1.0, 2.0], 0.1),
                                          "hybrid": Served(off, [1.0, 2.0], 0.1)}, off, offtopic=True)
    assert row.offtopic and row.ahead and row.scores["lexical"].answered == 0.5
    assert "| laws-cn | off-topic | 2 | — | — | — | — | — | — | — | — | 0.5000 | 0.5000 | — |" in table([row])


def test_fallbacks_per_set_and_staged_column_and_a_run_with_any_is_marked_not_comparable() -> None:
    scores = [_score("", 1.0, 1.0)]
    clean = {"lexical": Served(scores, [1.0], 0.1), "hybrid": Served(scores, [2.0], 0.2, fallbacks=0),
             "rerank": Served(scores, [3.0], 0.3, reranker_cpu_ms=1.0, fallbacks=0)}
    text = fallbacks_table(rows("laws-cn", "dev set", clean, scores))
    assert "| laws-cn | dev set | 1 | 0 | 0 |" in text and "No search fell back" in text
    fell = {**clean, "hybrid": Served(scores, [2.0], 0.2, fallbacks=3)}
    text = fallbacks_table(rows("laws-cn", "dev set", fell, scores) + rows("tidb", "first 20", clean, scores))
    assert "| laws-cn | dev set | 1 | 3 | 0 |" in text and "NOT COMPARABLE: 3 searches fell back" in text
    assert "lexical fallbacks" not in text  # a column without a stage has none to count
    assert fallbacks_table(rows("x", "y", {"lexical": clean["lexical"]}, scores)).startswith("No column")


def test_what_the_model_reads_per_served_system_whole_on_topic_sets_only() -> None:
    from gateway.evaluation.eval_table import summaries_table
    from gateway.evaluation.evaluation import score_queries

    q = EvalQuery("q1", "年假怎么休", ("d1",), ("十天",))
    ranked = [("d1", "摘要\n全文里有十天", "摘要"), ("d2", "别的\n年假十天", "年假十天")]
    scores = score_queries(lambda _: ranked, [q], summaries=True)
    assert (scores[0].hit, scores[0].in_summaries, scores[0].in_first, scores[0].summary_chars) == \
        (1.0, 1.0, 0.0, (2, 4))
    bare = score_queries(lambda _: [(d, t) for d, t, _ in ranked], [q])
    assert bare[0].in_summaries is None and bare[0].summary_chars == ()
    got = rows("laws", "dev", {"lexical": Served(scores, [1.0], 2.0, fallbacks=3)}, bare)
    text = summaries_table(got)
    assert "| laws | dev | 1 | lexical | 1.000 | 1.000 | 1.00 | 0.000 | 3 | 3 |" in text
    assert "bm25s" not in text  # the baseline gives no Summaries
