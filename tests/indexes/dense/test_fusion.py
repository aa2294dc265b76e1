"""indexes/dense/fusion.py: reciprocal rank fusion, the min-max score mix and the calibrated sum."""

from __future__ import annotations

import pytest

from indexes.dense.fusion import calibrated, mix, rrf


def test_rrf_rewards_agreement_and_follows_the_formula() -> None:
    lexical = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    dense = [("c", 0.9), ("d", 0.8), ("a", 0.7)]
    fused = dict(rrf(lexical, dense, k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62) and fused["d"] == pytest.approx(1 / 62)
    order = [k for k, _ in rrf(lexical, dense, k=60)]
    assert set(order[:2]) == {"a", "c"}  # in both lists: ahead of any single-list key


def test_rrf_weights_and_a_zero_weight_list() -> None:
    lexical, dense = [("a", 1.0)], [("b", 1.0)]
    assert [k for k, _ in rrf(lexical, dense, dense_weight=2.0)] == ["b", "a"]
    assert rrf(lexical, dense, dense_weight=0.0) == [("a", pytest.approx(1 / 61))]


def test_mix_normalises_each_list_to_0_1() -> None:
    fused = dict(mix([("a", 20.0), ("b", 10.0)], [("b", 0.5), ("c", 0.3)], lexical_weight=1.0, dense_weight=0.5))
    assert fused == {"a": pytest.approx(1.0), "b": pytest.approx(0.5), "c": pytest.approx(0.0)}
    assert dict(mix([("x", 3.0)], [])) == {"x": 1.0}  # a one-score list scales to 1


def test_calibrated_adds_bm25_over_ideal_and_the_calibrated_cosine() -> None:
    # ideal 10: BM25 20 is twice the question's IDF mass (not clamped); on the line 0.25 → 0, 0.65 → 1,
    # cosine 0.45 → 0.5.
    fused = dict(calibrated([("a", 20.0), ("b", 5.0)], {"a": 0.2, "b": 0.65, "c": 0.45}, ideal=10.0,
                            lexical_weight=0.8, dense_weight=0.2, line=(0.25, 0.65)))
    assert fused == {"a": pytest.approx(1.6), "b": pytest.approx(0.4 + 0.2), "c": pytest.approx(0.1)}
    assert [k for k, _ in calibrated([("a", 20.0), ("b", 5.0)], {"b": 0.65}, ideal=10.0)][0] == "a"


def test_calibrated_keeps_a_strong_lexical_lead_where_mix_would_stretch_a_weak_one() -> None:
    # Two weak BM25 hits (a tenth of the question's mass), the second nearer in meaning: min-max
    # stretches the weak lexical gap to 1 and keeps the first ahead; on fixed scales the model decides.
    lexical, cosines = [("x", 1.0), ("y", 0.9)], {"x": 0.30, "y": 0.60}
    assert [k for k, _ in mix(lexical, list(cosines.items()), lexical_weight=0.8, dense_weight=0.2)][0] == "x"
    assert [k for k, _ in calibrated(lexical, cosines, ideal=10.0)][0] == "y"
    # A strong lexical match (the whole question) keeps its lead over a nearer chunk that matches little.
    assert [k for k, _ in calibrated([("x", 10.0), ("y", 1.0)], {"x": 0.30, "y": 0.60}, ideal=10.0)][0] == "x"
    assert calibrated([("x", 1.0)], {}, ideal=0.0) == [("x", 0.0)]  # no mass to match: lexical side 0
