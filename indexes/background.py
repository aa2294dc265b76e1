"""How everyday a word is in general Chinese, whatever the corpus: its background probability.

Rationale: docs/design-notes.md, "indexes/background.py".
"""

from __future__ import annotations

import functools
import math

from .segmenter import jieba

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
    count = jieba().suggest_freq(word) if word else 1
    return min(max(count, 1), DICT_TOTAL - 1) / DICT_TOTAL


def specificity(word: str) -> float:
    """-ln P(word): how much a word says about what a text is about, in nats: 5.2 for 的, 7.2 for
    公司, 10 for 天气, 13.9 for 红烧肉, 17.9 for a string jieba's dictionary cannot build."""
    return -math.log(probability(word))
