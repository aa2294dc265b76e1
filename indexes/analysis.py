"""Text analysis shared by indexing and querying.

Rationale: docs/design-notes.md, "indexes/analysis.py".
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import stopwordsiso

from .invisible import FOLDED_OUT
from .segmenter import jieba

__all__ = [
    "CJK_RANGES",
    "MAX_TOKEN_CHARS",
    "ZERO_WIDTH",
    "IndexText",
    "QueryTerms",
    "STOP_WORDS",
    "cjk_bigrams",
    "cjk_runs",
    "fold_positions",
    "index_text",
    "latin_words",
    "normalize",
    "query_terms",
    "words",
]

MAX_TOKEN_CHARS = 64
"""Query terms longer than this (in characters) are dropped: they are never typed in queries
and Tantivy rejects terms over 65,530 bytes (indexed tokens are cut by the analyzer's
length filter, indexes.schema)."""

ZERO_WIDTH = FOLDED_OUT
"""Removed before any other folding, in indexed text and queries alike (`ZW\u200bMARKER`
was not found by `ZWMARKER`, and a query of Hangul fillers or soft hyphens found nothing yet was
not refused as empty): every format character (Cf: zero-width space, non-joiner and joiner, word
joiner, the BOM, the Mongolian vowel separator, the soft hyphen, bidi controls, tag
characters...) and the Hangul fillers U+115F, U+1160, U+3164, U+FFA0 (`indexes.invisible`,
the set `gateway.core.validate.blank` also ignores; control characters and separators are
not removed: they already break words). NFKC keeps them, and Python's `\\W` treats them as
word breaks, so a pasted page split words where the reader sees none. The cost: text that uses
U+200B as its only word separator (Thai, Khmer) has those words joined; U+200C/U+200D
(Persian, Indic scripts, emoji sequences) change no letter when removed. Changing this set
changes the analysis: bump `indexes.schema.SCHEMA_VERSION`."""
# BMP members as one bitmap class plus every astral code point (rare; the translate checks
# them): 11 µs per 500 characters where a class naming the astral members costs 33 µs.
_ZERO_WIDTH_RE = re.compile("[" + "".join(c for c in FOLDED_OUT if ord(c) < 0x10000) + "\U00010000-\U0010ffff]")
_ZERO_WIDTH_DROP = dict.fromkeys(map(ord, ZERO_WIDTH))

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
CJK_RANGES = _CJK
"""The code point ranges analysed as CJK (for a regex character class)."""
_CJK_RUN = re.compile(f"[{_CJK}]+")
# Letter/digit runs outside the CJK ranges, with underscores (identifiers stay whole).
_LATIN_RUN = re.compile(f"[^\\W{_CJK}]+")

NUMERALS = frozenset("零一二三四五六七八九")
"""The Chinese numerals stopwords-iso's list holds: a question that names one (页面六, 第六条, 六)
asks for that one, so they are kept as query terms and content words."""
STOP_WORDS: frozenset[str] = frozenset(stopwordsiso.stopwords("zh")) - NUMERALS
"""Chinese stop words removed from query terms: the `zh` list of stopwords-iso (794 words and
characters: function words, pronouns, interjections, question words such as 什么/哪些/怎么/咋),
a maintained collection rather than a list of our own, less its NUMERALS. Replaced our hand list
of 60 words (make eval: colloquial set MRR up, cmrc2018 within 0.001; see the commit
message)."""

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


def _needs_nfkc(cp: int) -> bool:
    """Whether code point `cp` makes `normalize` take the full NFKC + casefold path: NFKC
    turns it into or out of word characters (full-width letters and digits, ligatures,
    compatibility ideographs, circled numbers, superscripts...), it may compose with its
    neighbour (combining marks, Hangul jamo), or casefold and lower differ on it (ß)."""
    c = chr(cp)
    if unicodedata.category(c)[0] == "M" or 0x1100 <= cp <= 0x11FF or c.casefold() != c.lower():
        return True
    n = unicodedata.normalize("NFKC", c)
    return n != c and (c.isalnum() or any(x.isalnum() for x in n))


_nfkc_trigger: re.Pattern[str] | None = None


def _trigger() -> re.Pattern[str]:
    """One character class of every BMP code point `_needs_nfkc` holds for, plus every
    astral code point (rare, and checked in full). Built on first use (~40 ms): a BMP-only
    class compiles to a bitmap, so a search costs ~2.5 µs per 500-character chunk."""
    global _nfkc_trigger
    if _nfkc_trigger is None:
        chars = "".join(re.escape(chr(cp)) for cp in range(0x80, 0x10000)
                        if not 0xD800 <= cp <= 0xDFFF and _needs_nfkc(cp))
        _nfkc_trigger = re.compile(f"[{chars}\U00010000-\U0010ffff]")
    return _nfkc_trigger


def normalize(text: str, *, exact: bool = False) -> str:
    """Fold `text` for matching: zero-width characters out (`ZERO_WIDTH`), NFKC, case folding,
    Traditional → Simplified.

    text: any str. Returns a str, usually of the same length (NFKC and OpenCC may change
    the length for a few compatibility characters and phrases).
    Text without any character of `_trigger()` (nearly all Chinese text: its full-width
    punctuation is what NFKC would change) is lower-cased instead of NFKC-normalized and
    case-folded: the two results differ only in punctuation and spaces, which no token
    holds. exact=True always takes the full path, for comparisons of whole strings that
    must not depend on the other characters of a text (evaluation's answer matching).
    Rule sources: Unicode UAX #15 (NFKC), Python `str.casefold`, OpenCC `t2s.json`.
    """
    if not text:
        return ""
    if _ZERO_WIDTH_RE.search(text) is not None:
        text = text.translate(_ZERO_WIDTH_DROP)
    if not exact and _trigger().search(text) is None:
        folded = text.lower()
    else:
        folded = unicodedata.normalize("NFKC", text).casefold()
    if _CJK_RUN.search(folded) is None:
        return folded
    return str(_t2s().convert(folded))


# Full-width ASCII (U+FF01..U+FF5E) and the ideographic space → their half-width forms:
# the part of NFKC that matters for locating query terms, at a fraction of its cost.
_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def fold_positions(text: str) -> str:
    """A length-preserving fold of `text` for locating query terms in it (excerpts).

    Full-width → half-width ASCII, lower-case, Traditional → Simplified (character by
    character in practice). Unlike `normalize`, the result has the same length as `text`
    for almost every input, so a position in it is a position in `text`; callers check
    the lengths. For text without `_trigger()` characters it equals `normalize(text)`.
    """
    if not text:
        return ""
    folded = text.lower() if _trigger().search(text) is None else text.translate(_WIDTH_FOLD).lower()
    if _CJK_RUN.search(folded) is None:
        return folded
    return str(_t2s().convert(folded))


def cjk_runs(norm: str) -> list[str]:
    """The runs of CJK characters of normalized text, in order ("数据库，表" → 数据库, 表)."""
    return _CJK_RUN.findall(norm)


def latin_words(norm: str) -> list[str]:
    """Letter/digit words of normalized text outside the CJK ranges, in order, with repeats.

    "TiDB v8.5" → tidb, v8, 5; an identifier with underscores gives itself and its parts:
    "tidb_mem_quota_query" → tidb_mem_quota_query, tidb, mem, quota, query (as jieba's
    search mode does), so both the identifier and its words are matched.
    """
    out = _LATIN_RUN.findall(norm)
    if "_" not in norm:
        return out
    whole: list[str] = []
    for w in out:
        if "_" in w:
            parts = [p for p in w.split("_") if p]
            if len(parts) > 1:
                whole.append("_".join(parts))
            whole.extend(parts)
        else:
            whole.append(w)
    return whole


def words(runs: list[str]) -> list[str]:
    """jieba words (search mode: compounds and their sub-words) of the CJK runs."""
    return jieba().cut_for_search(" ".join(runs)) if runs else []


def cjk_bigrams(runs: list[str]) -> list[str]:
    """The character bigrams of each run (a one-character run gives none), in order.
    The same bigrams as the ngram(1, 2) analyzer of the index (indexes.schema)."""
    return [r[i:i + 2] for r in runs for i in range(len(r) - 1)]


@dataclass(frozen=True, slots=True)
class IndexText:
    """What one analysed text contributes to an index's fields.

    words: jieba words, space-joined (spaces between runs give empty tokens the
        whitespace tokenizer drops). latin: Latin words, space-joined.
    runs: the CJK runs, each a field value split by Tantivy into characters and bigrams.
    """

    words: str
    latin: str
    runs: list[str]


def index_text(norm: str) -> IndexText:
    """The `IndexText` of normalized text (`normalize`)."""
    runs = _CJK_RUN.findall(norm)
    return IndexText(" ".join(words(runs)), " ".join(latin_words(norm)), runs)


_LATIN_WORD = re.compile(f"[^\\W{_CJK}]+")


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """The analysed query: distinct terms of each kind, in query order.

    text: the normalized query.
    words: jieba words of the CJK runs. latin: Latin words (indexes.analysis.latin_words).
    bigrams: CJK character bigrams, from the query with stop words blanked out.
    chars: the CJK characters that stand alone in the query (a one-character run once stop
        words are blanked, e.g. 钥 in "钥"): no word or bigram of the index holds 钥 when the
        text says 密钥, so they are searched as characters.
    joins: the bigrams that span two jieba words of the query.
    expanded: the terms added by the index's synonyms, not typed by the user (weighed less);
    expansions: which synonym rule fired, as (the question's term, the synonym it added)
        pairs, for explain data (`indexes.synonyms.expand`; both empty without synonyms).
    """

    text: str
    words: tuple[str, ...]
    bigrams: tuple[str, ...]
    chars: tuple[str, ...] = ()
    joins: frozenset[str] = frozenset()
    latin: tuple[str, ...] = ()
    expanded: frozenset[str] = frozenset()
    expansions: tuple[tuple[str, str], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.words and not self.bigrams and not self.chars and not self.latin


def _dedupe(tokens: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([t for t in tokens if len(t) <= MAX_TOKEN_CHARS]))


def query_terms(query: str, *, stop_words: frozenset[str] = STOP_WORDS) -> QueryTerms:
    """Analyse a query exactly like indexed text, then drop duplicates and stop words.

    query: raw query text. Returns `QueryTerms`; every tuple may be empty (e.g. a query
    made only of punctuation or stop words). When removing stop words would leave nothing,
    they are kept, so "是什么" still searches for something.
    """
    norm = normalize(query)
    runs = _CJK_RUN.findall(norm)
    joined = " ".join(runs)
    latin_all = latin_words(norm)
    # One jieba pass in search mode gives the words (compounds and sub-words) and, from
    # the tokens that no other token contains, the query's own segmentation: its starts
    # mark word boundaries and its stop words are blanked before bigrams are taken, so
    # "改写成什么语句" gives 改写/写成/语句 and not the noise bigrams 成什/么语.
    tokens = jieba().tokenize(joined, mode="search") if joined else []
    words_all = [t for t, _, _ in tokens if t != " "]
    blanked = list(joined)
    starts: set[int] = set()
    cover = -1
    for token, start, end in sorted(tokens, key=lambda t: (t[1], -t[2])):
        if end <= cover or token == " ":
            continue  # a sub-word of a longer token
        cover = end
        starts.add(start)
        if token in stop_words:
            blanked[start:end] = " " * (end - start)
    kept = "".join(blanked)
    kept_runs = _CJK_RUN.findall(kept)
    found = [w for w in words_all if w not in stop_words]
    latin = [w for w in latin_all if w not in stop_words]
    grams = [g for g in cjk_bigrams(kept_runs) if g not in stop_words]
    if not found and not grams and not latin:
        found, latin, grams, kept, kept_runs = words_all, latin_all, cjk_bigrams(runs), joined, runs
    chars = [run for run in kept_runs if len(run) == 1]
    # Bigrams across a jieba word boundary ("务碰" in 任务|碰到): evidence that two words are
    # adjacent, weaker than a bigram inside a word; a bigram that is itself a word is not one.
    # (Two CJK characters side by side in `kept` are in one run, so a pair at a word start
    # that is one of the runs' bigrams is such a bigram.)
    pairs = {kept[p - 1:p + 1] for p in starts if p}
    joins = frozenset(pairs.intersection(cjk_bigrams(kept_runs)).difference(words_all))
    return QueryTerms(text=norm, words=_dedupe(found), bigrams=_dedupe(grams), chars=_dedupe(chars),
                      joins=joins, latin=_dedupe(latin))
