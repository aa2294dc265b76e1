"""How everyday a word is in general Chinese, whatever the corpus: its background probability.

The lexical relevance (`indexes.relevance.Question`) weighs each word of a question by how much
it says about a topic and asks whether a corpus uses it more than general language does. Both
need the word's frequency in general text, independent of any index: an index's own statistics
cannot tell an everyday word it happens to lack (天气 in the TiDB docs) from a domain word.

Source: jieba's dictionary (dict.txt: about 349,000 words with their counts in about 60 million
tokens of general Chinese), which ships compiled inside the rjieba wheel (jieba-rs); nothing is
downloaded or vendored. `rjieba.suggest_freq(w)` is a word's count + 1 when the dictionary holds
it, and for another string the count that the product of its parts' probabilities implies
(jieba-rs `Jieba::suggest_freq`), so an unknown compound (充电宝, 溏心蛋) gets a small count, as
rare words should. Checked against the dictionary's total (tests/indexes/test_relevance.py): two
dictionary words a and b give suggest_freq(ab) - 1 ≈ f(a) f(b) / DICT_TOTAL.

Words jieba's dictionary has no entry for by nature: numbers (7, 38, 2024) count at
NUMBER_PROBABILITY, an everyday word's probability; Latin words (tidb, iphone, wifi) take what
suggest_freq gives (the dictionary holds almost none: they count as rare words).
"""

from __future__ import annotations

import functools
import math

import rjieba

__all__ = ["DICT_TOTAL", "NUMBER_PROBABILITY", "probability", "specificity"]

DICT_TOTAL = 60_101_967
"""The sum of the counts of jieba's dict.txt (the tokens the counts come from)."""
NUMBER_PROBABILITY = 1e-4
"""Background probability of a number (jieba's dictionary lists none): that of a word such as
发展 or 问题 (~1e-3) would make numbers stop words, that of a rare word (~1e-7) domain terms; 1e-4
is an everyday word's (天气 4e-5, 今天 3e-4)."""


@functools.lru_cache(maxsize=65_536)
def probability(word: str) -> float:
    """P(word) in general Chinese text, 0 < p < 1 (module doc). word: a normalised token
    (`indexes.analysis.normalize`); '' counts as unknown. Never raises."""
    if word.isdigit():
        return NUMBER_PROBABILITY
    count = rjieba.suggest_freq(word) if word else 1
    return min(max(count, 1), DICT_TOTAL - 1) / DICT_TOTAL


def specificity(word: str) -> float:
    """-ln P(word): how much a word says about what a text is about, in nats: 5.2 for 的, 7.2 for
    公司, 10 for 天气, 13.9 for 红烧肉, 17.9 for a string jieba's dictionary cannot build."""
    return -math.log(probability(word))
