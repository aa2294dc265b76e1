"""Text analysis shared by indexing and querying.

Every indexed token and every query term goes through the same two steps:

1. `normalize`: Unicode NFKC (full-width → half-width, compatibility forms),
   `str.casefold`, then Traditional → Simplified Chinese with OpenCC's `t2s`
   profile. Traditional and Simplified text therefore meet on the same tokens,
   in both directions.
2. Tokenization into two token streams, each written space-joined into a
   Tantivy field that uses the plain whitespace tokenizer (Tantivy has no
   Chinese tokenizer and Python callables cannot be registered as one, see
   /work/shared/notes/tantivy-py-0.27.md):
   - `analyze`: jieba words (rjieba `cut_for_search`, so long compounds also
     yield their sub-words), punctuation and whitespace dropped;
   - `bigrams`: CJK character bigrams (a lone CJK character stays a unigram)
     plus Latin/digit words as whole tokens.

`query_terms` applies the same analysis to a query, removes duplicates and
drops stop words (stopwords-iso's Chinese list) that carry no topical signal.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import rjieba
import stopwordsiso

__all__ = [
    "MAX_TOKEN_CHARS",
    "QueryTerms",
    "STOP_WORDS",
    "analyze",
    "bigrams",
    "index_tokens",
    "normalize",
    "query_terms",
]

MAX_TOKEN_CHARS = 64
"""Tokens longer than this (in characters) are dropped: they are never typed in queries
and Tantivy rejects terms over 65,530 bytes."""

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# One regex pass splits a normalized string into CJK runs and Latin/digit words.
_LATIN_WORD = re.compile(f"[^\\W_{_CJK}]+")

STOP_WORDS: frozenset[str] = frozenset(stopwordsiso.stopwords("zh"))
"""Chinese stop words removed from query terms: the `zh` list of stopwords-iso (794 words and
characters: function words, pronouns, interjections, question words such as 什么/哪些/怎么/咋),
a maintained collection rather than a list of our own. Replaced our hand list of 60 words in
issue 12 (make eval: colloquial set MRR up, cmrc2018 within 0.001; see the commit message)."""

_converter: Any = None
_converter_lock = threading.Lock()


def _t2s() -> Any:
    """The process-wide OpenCC Traditional→Simplified converter, built on first use."""
    global _converter
    if _converter is None:
        with _converter_lock:
            if _converter is None:
                import opencc

                _converter = opencc.OpenCC("t2s")
    return _converter


def normalize(text: str) -> str:
    """Fold `text` for matching: NFKC, casefold, Traditional → Simplified.

    text: any str. Returns a str, usually of the same length (NFKC and OpenCC may
    change the length for a few compatibility characters and phrases).
    Rule sources: Unicode UAX #15 (NFKC), Python `str.casefold`, OpenCC `t2s.json`.
    """
    if not text:
        return ""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if _CJK_RUN.search(folded) is None:
        return folded
    return str(_t2s().convert(folded))


# Full-width ASCII (U+FF01..U+FF5E) and the ideographic space → their half-width forms:
# the part of NFKC that matters for locating query terms, at a fraction of its cost.
_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def normalize_positions(text: str) -> str:
    """A cheap, length-preserving fold of `text` for locating query terms in it.

    Full-width → half-width ASCII, lower-case, Traditional → Simplified (character by
    character in practice). Unlike `normalize`, the result has the same length as `text`
    for almost every input, so a position in it is a position in `text`; callers check
    the lengths and fall back when they differ. Used for excerpts, not for indexing.
    """
    if not text:
        return ""
    folded = text.translate(_WIDTH_FOLD).lower()
    if _CJK_RUN.search(folded) is None:
        return folded
    return str(_t2s().convert(folded))


_NON_WORD = re.compile(r"[^\w]+")


def analyze(text: str, *, normalized: bool = False) -> list[str]:
    """jieba tokens of `text` for the `*_words` fields, in text order, with repeats.

    text: raw text (normalized here unless `normalized=True`).
    Punctuation and whitespace are blanked before segmentation (one regex pass over
    the text instead of a test per token), so no token is punctuation or space;
    tokens over MAX_TOKEN_CHARS are dropped. `tidb_auto_analyze_ratio` yields the
    whole identifier and its parts.
    """
    norm = text if normalized else normalize(text)
    cleaned = _NON_WORD.sub(" ", norm)
    return [
        t for t in rjieba.cut_for_search(cleaned)
        if not t.isspace() and t != "_" and len(t) <= MAX_TOKEN_CHARS
    ]


def bigrams(text: str, *, normalized: bool = False) -> list[str]:
    """CJK character bigrams and Latin/digit words of `text`, as a bag (order not kept).

    A CJK run "数据库" gives 数据, 据库; a one-character run "表" gives 表;
    "TiDB v8.5" gives tidb, v8, 5. Non-word characters separate runs.
    The analysis fields index term frequencies without positions, so order is moot.
    """
    norm = text if normalized else normalize(text)
    out = [w for w in _LATIN_WORD.findall(norm) if len(w) <= MAX_TOKEN_CHARS]
    for run in _CJK_RUN.findall(norm):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(map(str.__add__, run, run[1:]))
    return out


def index_tokens(normalized_text: str) -> tuple[str, str]:
    """(jieba tokens, bigram tokens) of already-normalized text, each space-joined for a
    whitespace-tokenized field. Same tokens as `analyze`/`bigrams`, built with fewer
    Python-level steps: space tokens vanish in the whitespace tokenizer and overlong
    ones in its length filter (indexes.schema.TOKENIZER)."""
    words = " ".join(rjieba.cut_for_search(_NON_WORD.sub(" ", normalized_text)))
    return words, " ".join(bigrams(normalized_text, normalized=True))


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """The analysed query: distinct jieba words and distinct bigram tokens, in query order.

    text: the normalized query (used for query-biased excerpts).
    chars: the CJK characters that stand alone in the query (a one-character run once stop
        words are blanked, e.g. 钥 in "钥"), searched on the unigram fields: no word or
        bigram of the index holds 钥 when the text says 密钥 (issue 9).
    joins: the bigrams (of `bigrams`) that span two jieba words of the query.
    """

    text: str
    words: tuple[str, ...]
    bigrams: tuple[str, ...]
    chars: tuple[str, ...] = ()
    joins: frozenset[str] = frozenset()

    @property
    def is_empty(self) -> bool:
        return not self.words and not self.bigrams and not self.chars


def _dedupe(tokens: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tokens))


def query_terms(query: str, *, stop_words: frozenset[str] = STOP_WORDS) -> QueryTerms:
    """Analyse a query exactly like indexed text, then drop duplicates and stop words.

    query: raw query text. Returns `QueryTerms`; both tuples may be empty (e.g. a
    query made only of punctuation or stop words). When removing stop words would
    leave nothing, they are kept, so "是什么" still searches for something.
    """
    norm = normalize(query)
    words_all = analyze(norm, normalized=True)
    grams_all = bigrams(norm, normalized=True)
    # Bigrams come from the query with stop words blanked out, so that "改写成什么语句"
    # gives 改写/写成/语句 and not the noise bigrams 成什/么语 that span a stop word.
    blanked = list(norm)
    starts: set[int] = set()
    for token, start, end in rjieba.tokenize(norm):
        starts.add(start)
        if token in stop_words:
            blanked[start:end] = " " * (end - start)
    kept = "".join(blanked)
    words = [w for w in words_all if w not in stop_words]
    grams = [g for g in bigrams(kept, normalized=True) if g not in stop_words]
    if not words and not grams:
        words, grams, kept = words_all, grams_all, norm
    chars = [run for run in _CJK_RUN.findall(kept) if len(run) == 1]
    # Bigrams across a jieba word boundary ("务碰" in 任务|碰到): evidence that two words are
    # adjacent, weaker than a bigram inside a word; a bigram that is itself a word is not one.
    whole = set(words_all)
    joins = frozenset(kept[i:i + 2] for m in _CJK_RUN.finditer(kept) for i in range(m.start(), m.end() - 1)
                      if i + 1 in starts and kept[i:i + 2] not in whole)
    return QueryTerms(text=norm, words=_dedupe(words), bigrams=_dedupe(grams), chars=_dedupe(chars),
                      joins=joins)
