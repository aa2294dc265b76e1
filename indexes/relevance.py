"""One relevance scale, 0..1, for every hit of every index kind.

Rationale: docs/design-notes.md, "indexes/relevance.py".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .analysis import CJK_RANGES, STOP_WORDS
from .background import probability, specificity
from .segmenter import jieba
from .synonyms import EXPANSION_WEIGHT
from .types import Scores

__all__ = ["DENSE_ONE", "DENSE_ZERO", "LEXICAL_SHARE", "PRIOR", "Question", "Unit", "content_units", "dense", "domain",
           "ENGLISH_FUNCTION_WORDS", "FUNCTION_WORDS", "hybrid", "lexical", "of", "question"]

DENSE_ZERO = 0.30
DENSE_ONE = 0.65
"""Cosines of the embedded model (use-multilingual-v3) mapped to relevance 0 and 1 (module doc);
another model has its own line (`indexes.dense.config.COSINE_LINES`)."""
LEXICAL_SHARE = 0.5
"""Weight of the lexical relevance in a hybrid hit's relevance (module doc)."""
PRIOR = 4.0
"""Documents of general Chinese added to both counts of the domain weight (module doc): one
document moves a word's d by at most 1 / (2 × PRIOR) = 0.125, and by 1 / (D + E + 8) in general."""


def _clamp(x: float) -> float:
    return 0.0 if x != x or x < 0.0 else 1.0 if x > 1.0 else x  # x != x: NaN


def lexical(bm25: float, ideal: float) -> float:
    """bm25 / ideal, >= 0, not clamped above (a chunk repeating the question's terms, or holding
    them in its title too, passes 1): the lexical side of a fusion (module doc); 0.0 when
    ideal <= 0 (nothing to match)."""
    return max(bm25 / ideal, 0.0) if ideal > 0 and bm25 == bm25 else 0.0


def dense(cosine: float, line: tuple[float, float] = (DENSE_ZERO, DENSE_ONE)) -> float:
    """A cosine similarity (-1..1) on the 0..1 scale (module doc); line: (cosine at 0, cosine at 1)
    of the model (`indexes.dense.config.COSINE_LINES`; default: use-multilingual-v3's)."""
    zero, one = line
    return _clamp((cosine - zero) / (one - zero)) if one > zero else float(cosine >= one)


def hybrid(lexical_relevance: float, cosine: float | None,
           line: tuple[float, float] = (DENSE_ZERO, DENSE_ONE)) -> float:
    """A hybrid hit's relevance from its lexical relevance (0 when BM25 did not find it) and its
    cosine (None when no vector of it was read: dense side 0), on the model's `line` (`dense`)."""
    d = dense(cosine, line) if cosine is not None else 0.0
    return _clamp(LEXICAL_SHARE * lexical_relevance + (1.0 - LEXICAL_SHARE) * d)


def of(scores: Scores, computed: float) -> float:
    """The relevance to show: the reranker's (clamped) when one ran, else `computed`."""
    return _clamp(scores.rerank) if scores.rerank is not None else _clamp(computed)


_CJK_WORD = re.compile(f"[{CJK_RANGES}]+")
_LATIN = re.compile(f"[^\\W_{CJK_RANGES}]+")
_LATIN_CHAR = re.compile(f"[^\\W_{CJK_RANGES}]")
_A_NOT_A = re.compile(r"(\w)[不没]\1")
ENGLISH_FUNCTION_WORDS = frozenset(
    "a an the and or but nor not no if then else of to in on at by for with from as into onto than so "
    "is are was were be been being am do does did done have has had having can could will would shall "
    "should may might must i you he she it we they me him her us them my your his its our their this "
    "that these those what which who whom whose how why when where there here all any some each".split())
"""English function words (articles, prepositions, conjunctions, auxiliaries, pronouns, question
words): jieba's dictionary knows no English, so without this "is" or "the" in a question would
weigh as much as an unknown word. A grammatical closed class, not stopwords-iso's English list,
which also drops words that name things in technical text (br, run, system, new)."""
FUNCTION_WORDS = frozenset({"请问", "一下"})
"""Politeness forms that stopwords-iso's list lacks; question words (怎么, 如何, 什么, 吗, 怎么样, 咋)
are in it, and A-not-A questions (能不能, 是不是, 要不要, 有没有, 可不可以) are recognised by form."""


def content_units(norm: str) -> list[str]:
    """The content words of a normalised question (`indexes.analysis.normalize`), in order, once
    each: its jieba segmentation (with the HMM, which finds names and new words: 蔡敏, 带伞),
    minus stop words (stopwords-iso),
    FUNCTION_WORDS, punctuation and numbers; an A-not-A question (X不X, X没X) counts as its X
    (熟没熟 → 熟; 能不能 → 能, a stop word). Numbers (7, 38, 2024) say which one, not what about,
    and jieba's dictionary has no frequency for them. Identifiers split into their words
    (tidb_mem_quota_query → tidb, mem, quota, query; no-sudo → no, sudo)."""
    out: dict[str, None] = {}
    for token in jieba().cut(_A_NOT_A.sub(r" \1 ", norm)):
        for word in (token,) if _CJK_WORD.fullmatch(token) else _LATIN.findall(token):
            if word not in STOP_WORDS and word not in ENGLISH_FUNCTION_WORDS and word not in FUNCTION_WORDS \
                    and not word.isdigit():
                out[word] = None
    return list(out)


def domain(documents_with: int, expected: float) -> float:
    """d(u) of the module doc: (D + PRIOR) / (D + E + 2 × PRIOR), 0..1. documents_with (D): the
    index's documents holding u; expected (E >= 0): the documents that would hold it in general
    Chinese (`indexes.profile.Profile.expected`)."""
    return (max(documents_with, 0) + PRIOR) / (max(documents_with, 0) + max(expected, 0.0) + 2.0 * PRIOR)


@dataclass(frozen=True, slots=True)
class Unit:
    """One content word of a question: text (normalised), weight (its specificity, nats),
    domain (d, 0..1), latin (matched as a whole word rather than as a substring), alternatives:
    (synonym, its d) of the index's synonyms for it (`indexes.synonyms`), each found counting
    EXPANSION_WEIGHT of the word (as the ranking weighs an expansion)."""

    text: str
    weight: float
    domain: float
    latin: bool
    alternatives: tuple[tuple[str, float], ...] = ()


class Question:
    """A question's content words, judged against one index (`question`). Immutable."""

    __slots__ = ("total", "units")

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = tuple(units)
        self.total = sum(u.weight for u in self.units)

    def about(self, folded: str) -> float:
        """The lexical relevance (module doc) of a chunk whose title, heading and text, folded
        (`indexes.analysis.normalize`, or the stored `text_fold`), are `folded`: 0..1; 0.0 for
        a question without content words."""
        if self.total <= 0:
            return 0.0
        got = 0.0
        for u in self.units:
            if _holds_word(folded, u.text) if u.latin else u.text in folded:
                got += u.weight * u.domain
            elif u.alternatives:
                found = (d for alt, d in u.alternatives
                         if (_holds_word(folded, alt) if _LATIN.fullmatch(alt) else alt in folded))
                got += u.weight * EXPANSION_WEIGHT * max(found, default=0.0)
        return _clamp(got / self.total)

    def matched(self, folded: str) -> list[tuple[Unit, str]]:
        """How each content word is found in `folded` (as `about` finds it), in order: (unit,
        '' when not found, the unit's own text when found directly, else the synonym found)."""
        out: list[tuple[Unit, str]] = []
        for u in self.units:
            if _holds_word(folded, u.text) if u.latin else u.text in folded:
                out.append((u, u.text))
                continue
            alt = next((a for a, _ in u.alternatives
                        if (_holds_word(folded, a) if _LATIN.fullmatch(a) else a in folded)), "")
            out.append((u, alt))
        return out


def _holds_word(text: str, word: str) -> bool:
    """Whether `text` holds the Latin `word` as a whole word: not inside a longer run of letters
    and digits (a CJK character or punctuation next to it is a boundary). str.find, not a regex
    per word: compiling one over the CJK ranges cost ~10 ms."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if (start == 0 or _LATIN_CHAR.match(text, start - 1) is None) and \
                (end == len(text) or _LATIN_CHAR.match(text, end) is None):
            return True
        start = text.find(word, start + 1)
    return False


def question(norm: str, documents_with: Callable[[str, tuple[str, ...]], int], expected: Callable[[float], float],
             expansions: Sequence[tuple[str, str]] = ()) -> Question:
    """The `Question` of a normalised query `norm` (`indexes.analysis.normalize`; the analysed
    query's `QueryTerms.text`, so a search folds its question once) over an index.
    documents_with(term, fields): the index's documents holding `term` in any of `fields`
    (`indexes.search.DocFreqs.documents_with`): a CJK unit is looked up as a jieba word in
    body_words or title_words, as the background counts it (a token, not characters inside other
    words), a Latin one in body_latin. expected(p): documents expected to hold a word of
    background probability p (`indexes.profile.Profile.expected`). expansions: (question's term,
    synonym) pairs of the index's synonyms that fired (`indexes.analysis.QueryTerms.expansions`):
    a word's synonyms count for it (`Unit`)."""
    def held(text: str) -> int:  # documents whose text or title holds the word
        return documents_with(text, ("body_latin",) if _LATIN.fullmatch(text) else ("body_words", "title_words"))

    def weight_of(text: str, n: int) -> float:
        return domain(n, expected(probability(text)))

    units: dict[str, Unit] = {}
    for word in content_units(norm):
        latin = _LATIN.fullmatch(word) is not None
        found = held(word)
        # A word the HMM made up (not in jieba's dictionary) that the index does not hold either
        # counts as its dictionary words: "说太忙" → 说, 太, 忙, not one unknown word.
        parts = ([w for w in content_units(" ".join(jieba().cut(word, False))) if w != word]
                 if not latin and not found and len(word) > 1 and not jieba().has_word(word) else [])
        for text in parts or [word]:
            if text not in units:
                n = found if text == word else held(text)
                alternatives = tuple((syn, weight_of(syn, held(syn)))
                                     for term, syn in expansions if term == text and syn != text)
                units[text] = Unit(text, specificity(text), weight_of(text, n), latin and text == word, alternatives)
    return Question(list(units.values()))
