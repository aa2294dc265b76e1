"""indexes/background.py: general-language probabilities from jieba's dictionary inside rjieba."""

from __future__ import annotations

import pytest
import rjieba

from indexes.background import DICT_TOTAL, NUMBER_PROBABILITY, probability, specificity


def test_the_dictionary_total_is_the_one_suggest_freq_uses() -> None:
    # For two dictionary words a, b that jieba keeps apart, suggest_freq(ab) - 1 ≈ f(a) f(b) / total.
    for a, b in (("我们", "中国"), ("中国", "公司"), ("一个", "问题")):
        fa, fb, ab = rjieba.suggest_freq(a) - 1, rjieba.suggest_freq(b) - 1, rjieba.suggest_freq(a + b) - 1
        assert fa * fb / ab == pytest.approx(DICT_TOTAL, rel=0.02)


def test_everyday_words_are_likelier_than_domain_words_and_unknown_strings_rarest() -> None:
    assert probability("的") > probability("公司") > probability("天气") > probability("红烧肉") > probability("充电宝")
    assert specificity("充电宝") == pytest.approx(-__import__("math").log(1 / DICT_TOTAL), abs=0.01)
    assert probability("38") == probability("2024") == NUMBER_PROBABILITY  # numbers: an everyday word's
    assert 0 < probability("") < 1e-7 and 0 < probability("tidb") < 1e-6
