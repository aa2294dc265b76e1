"""indexes/dense/fusion.py: reciprocal rank fusion and the min-max score mix."""

from __future__ import annotations

import pytest

from indexes.dense.fusion import mix, rrf


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
