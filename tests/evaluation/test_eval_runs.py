"""gateway.evaluation.eval_runs: per-question results saved, and the wins/losses rule against them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from gateway.evaluation import eval_runs
from gateway.evaluation.evaluation import EvalQuery, QueryScore


def _q(qid: str, mrr: float, hit: float, results: int = 10) -> QueryScore:
    return QueryScore(EvalQuery(qid, "问题", ("a",), ("答",)), mrr, hit, results)


def test_saved_runs_round_trip_newest_last_and_without_question_text(tmp_path: Path) -> None:
    first = eval_runs.save(tmp_path, {"laws/dev": {"lexical": [_q("q1", 0.5, 1.0)]}}, "abc123",
                           dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC))
    second = eval_runs.save(tmp_path, {"laws/dev": {"lexical": [_q("q1", 1.0, 1.0)]}}, "def456+dirty",
                            dt.datetime(2026, 12, 1, 11, 0, tzinfo=dt.UTC))
    assert eval_runs.latest(tmp_path) == second and eval_runs.latest(tmp_path, before=second) == first
    data = eval_runs.load(first)
    assert data["rev"] == "abc123" and data["sets"] == {"laws/dev": {"lexical": {"q1": [0.5, 1.0, 10]}}}
    assert "问题" not in first.read_text("utf-8")
    assert eval_runs.latest(tmp_path / "none") is None


def test_wins_and_losses_per_set_and_the_rule() -> None:
    before = {"sets": {"laws/dev": {"lexical": {"q1": [0.5, 1.0, 10], "q2": [1.0, 1.0, 10], "q3": [0.0, 0.0, 10],
                                                "q4": [0.5, 0.0, 10]}},
                       "laws/off": {"lexical": {"o1": [0, 0, 3], "o2": [0, 0, 0], "o3": [0, 0, 2]}}}}
    after = {"laws/dev": {"lexical": [_q("q1", 1.0, 1.0), _q("q2", 0.5, 1.0), _q("q3", 0.0, 0.0),
                                      _q("q4", 0.5, 1.0), _q("new", 1.0, 1.0)],
                          "hybrid": [_q("q1", 1.0, 1.0)]},  # no hybrid in the saved run: not compared
             "laws/off": {"lexical": [QueryScore(EvalQuery(q, "x", (), ()), 0, 0, n)
                                      for q, n in (("o1", 0), ("o2", 4), ("o3", 1))]}}
    dev, off = eval_runs.compare(before, after, frozenset({"laws/off"}))
    # q1 rank up, q4 same rank with the answer now found: won; q2 rank down: lost; q3 even; 'new' not compared
    assert (dev.set_name, dev.system, dev.wins, dev.losses, dev.compared, dev.holds) == \
        ("laws/dev", "lexical", 2, 1, 4, True)
    # o1 no longer answered: won; o2 answered now: lost; o3 answered before and after: even
    assert (off.wins, off.losses, off.holds) == (1, 1, True)
    broken = eval_runs.compare(before, {"laws/dev": {"lexical": [_q("q1", 0.0, 0.0)]}})
    assert [(v.wins, v.losses, v.holds) for v in broken] == [(0, 1, False)]
    text = eval_runs.verdicts_table(broken, "run x")
    assert "| laws/dev | lexical | 1 | 0 | 1 | BROKEN |" in text and "broken on laws/dev (lexical)" in text


def test_current_rev_names_a_commit_or_unknown(tmp_path: Path) -> None:
    assert eval_runs.current_rev(tmp_path) == "unknown"  # not a git checkout
    rev = eval_runs.current_rev(Path(__file__).parent)
    assert rev == "unknown" or len(rev.split("+")[0]) >= 7


def test_eval_refuses_a_floor_outside_0_1_and_a_missing_saved_run(tmp_path: Path) -> None:
    from tests.support import harness

    r = harness.kbgate("eval", "--relevance-floor", "1.5", "--workdir", str(tmp_path))
    assert r.returncode == 2 and "--relevance-floor must be a number from 0 to 1" in r.stderr
    (tmp_path / "docs.jsonl").write_text("", "utf-8")
    (tmp_path / "q.jsonl").write_text("", "utf-8")
    r = harness.kbgate("eval", "--against", str(tmp_path / "none.json"), "--workdir", str(tmp_path), "--corpus",
                       f"x={tmp_path / 'docs.jsonl'}:{tmp_path / 'q.jsonl'}", "--hybrid", "none")
    assert r.returncode == 2 and "no such saved run" in r.stderr


def test_a_run_saves_its_fallbacks_and_the_comparison_says_whether_either_run_had_any(tmp_path: Path) -> None:
    per_set = {"laws/dev": {"lexical": [_q("q1", 1.0, 1.0)], "hybrid": [_q("q1", 1.0, 1.0)]}}
    clean = {"laws/dev": {"lexical": None, "hybrid": 0}}
    saved = eval_runs.load(eval_runs.save(tmp_path, per_set, "abc", fallbacks=clean))
    assert saved["fallbacks"] == {"laws/dev": {"lexical": None, "hybrid": 0}}
    assert eval_runs.fallbacks_note(saved, clean).startswith("No search fell back in either run")
    note = eval_runs.fallbacks_note(saved, {"laws/dev": {"lexical": None, "hybrid": 2}})
    assert note.startswith("NOT COMPARABLE") and "this run laws/dev (hybrid: 2)" in note
    assert "did not count fallbacks" in eval_runs.fallbacks_note({"sets": {}}, clean)  # a run saved before


def test_eval_refuses_a_ready_wait_that_is_not_positive(tmp_path: Path) -> None:
    from tests.support import harness

    r = harness.kbgate("eval", "--ready-seconds", "0", "--workdir", str(tmp_path))
    assert r.returncode == 2 and "--ready-seconds must be a number of seconds above 0" in r.stderr


def test_summary_wins_and_losses_judge_the_answer_in_the_summaries(tmp_path: Path) -> None:
    def scored(qid: str, in5: float, in1: float) -> QueryScore:
        return QueryScore(EvalQuery(qid, "问题", ("a",), ("答",)), 1.0, 1.0, 5, in5, in1, (300, 200))

    saved = eval_runs.save(tmp_path, {"laws/dev": {"hybrid": [scored("q1", 0, 0), scored("q2", 1, 1),
                                                              scored("q3", 1, 0)]}}, "abc")
    before = eval_runs.load(saved)
    assert before["sets"]["laws/dev"]["hybrid"]["q1"] == [1.0, 1.0, 5, 0, 0]
    after = {"laws/dev": {"hybrid": [scored("q1", 1, 0), scored("q2", 1, 0), scored("q3", 1, 1)]},
             "laws/off": {"hybrid": [scored("o1", 0, 0)]}}
    (v,) = eval_runs.compare(before, after, frozenset({"laws/off"}), summaries=True)
    # q1 enters the Summaries, q3 the first Summary: won; q2 leaves the first Summary: lost
    assert (v.set_name, v.wins, v.losses, v.compared) == ("laws/dev", 2, 1, 3)
    # a run saved without Summary figures is not compared on them
    assert eval_runs.compare({"sets": {"laws/dev": {"hybrid": {"q1": [1.0, 1.0, 5]}}}}, after,
                             summaries=True) == []
