"""indexes.analysis: normalization, tokens, query terms."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest
import stopwordsiso
import tantivy

from indexes.analysis import (
    NUMERALS,
    STOP_WORDS,
    cjk_bigrams,
    cjk_runs,
    fold_positions,
    index_text,
    latin_words,
    normalize,
    query_terms,
    words,
)
from indexes.invisible import FORMAT_RANGES, HANGUL_FILLERS, SEPARATOR_RANGES, blank
from indexes.schema import CHARS_TOKENIZER, build_schema, register_analyzers


def test_normalize_folds_width_and_case() -> None:
    assert normalize("ＴｉＤＢ　５．０") == "tidb 5.0"
    assert normalize("MySQL") == normalize("mysql") == "mysql"


def test_normalize_traditional_to_simplified() -> None:
    assert normalize("資料庫軟體") == "资料库软体"
    assert normalize("数据库") == "数据库"  # simplified text is left alone


@pytest.mark.parametrize("text", [
    "数据库，表（TiDB）：ＡＢＣ１２３",  # full-width letters and digits
    "①号机房，ﬁle ﬂag",  # circled digit, ligatures
    "Straße 與 ΣΑΣ",  # casefold differs from lower
    "cafe\u0301 와 ㄱ",  # a combining mark, Hangul jamo
    "数据库，表。“引号”——破折号……省略",  # only punctuation differs
    "𠀀𠀁 emoji 😀 ℃ ㎡ µs",  # astral characters, compatibility symbols
])
def test_normalize_matches_nfkc_casefold_on_every_word_character(text: str) -> None:
    # The fast path skips NFKC when it would change only punctuation and spaces: the word
    # characters (all that tokens hold) are those of the full NFKC + casefold + t2s form.
    fast, exact = normalize(text), normalize(text, exact=True)
    assert exact == normalize(unicodedata.normalize("NFKC", text).casefold(), exact=True)
    assert [c for c in fast if c.isalnum()] == [c for c in exact if c.isalnum()]
    assert latin_words(fast) == latin_words(exact) and cjk_runs(fast) == cjk_runs(exact)


def test_traditional_and_simplified_tokens_meet() -> None:
    assert index_text(normalize("臺灣的軟體")) == index_text(normalize("台湾的软体"))
    assert query_terms("這個軟體很好").words == query_terms("这个软体很好").words


def test_index_text_fields() -> None:
    got = index_text(normalize("你好， 世界！ (TiDB) tidb_mem_quota_query=8048 v8.5"))
    assert got.runs == ["你好", "世界"]
    assert set(got.words.split()) == {"你好", "世界"}  # jieba sees the CJK runs only
    assert got.latin.split() == ["tidb", "tidb_mem_quota_query", "tidb", "mem", "quota", "query", "8048",
                                 "v8", "5"]


def test_latin_words_keep_identifiers_whole_and_split() -> None:
    assert latin_words("a tidb_mem__quota_ b") == ["a", "tidb_mem_quota", "tidb", "mem", "quota", "b"]
    assert latin_words("数据库v8.5和mysql") == ["v8", "5", "mysql"]


def test_cjk_bigrams_match_the_index_analyzer() -> None:
    # The query's characters and bigrams are the tokens the Rust analyzer indexes.
    index = tantivy.Index(build_schema())
    register_analyzers(index)
    runs = cjk_runs(normalize("数据库，表 TiDB 集群"))
    analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(1, 2, False)).build()
    indexed = [t for r in runs for t in analyzer.analyze(r)]
    assert sorted(indexed) == sorted([c for r in runs for c in r] + cjk_bigrams(runs))
    assert cjk_bigrams(runs) == ["数据", "据库", "集群"]
    assert CHARS_TOKENIZER  # registered under this name (indexes.schema)


def test_words_are_jieba_search_mode() -> None:
    assert set(words(["数据库集群"])) >= {"数据", "数据库", "集群"}
    assert words([]) == []


def test_query_terms_dedupes_and_drops_stop_words() -> None:
    terms = query_terms("什么是数据库？数据库是什么？")
    assert len(terms.words) == len(set(terms.words))
    assert "数据库" in terms.words or "数据" in terms.words
    assert not set(terms.words) & STOP_WORDS
    assert "什么" not in terms.bigrams
    # no bigram spans a removed stop word ("么数", "是数")
    assert "么数" not in terms.bigrams and "是数" not in terms.bigrams


def test_query_terms_latin_words_and_lone_characters() -> None:
    terms = query_terms("TiDB 的 tidb_mem_quota_query 钥")
    assert terms.latin == ("tidb", "tidb_mem_quota_query", "mem", "quota", "query")
    assert terms.chars == ("钥",)
    assert not any(w.isascii() for w in terms.words)


def test_query_segmentation_marks_joins() -> None:
    terms = query_terms("任务碰到错误")
    assert "务碰" in terms.joins and "任务" not in terms.joins


def test_a_standalone_chinese_numeral_is_a_query_term() -> None:
    # 页面六 asks for page six: 六 is searched, and so is the bigram that ties it to 页面
    terms = query_terms("页面六")
    assert "六" in terms.words and "面六" in terms.bigrams
    assert query_terms("六").chars == ("六",)
    assert "三" in query_terms("三副本的集群").words


def test_the_numerals_are_the_only_words_taken_off_the_stop_list() -> None:
    # every other analysis stays as it was: the list is stopwords-iso's, less exactly these
    assert frozenset(stopwordsiso.stopwords("zh")) - STOP_WORDS == NUMERALS == frozenset("零一二三四五六七八九")
    assert STOP_WORDS <= frozenset(stopwordsiso.stopwords("zh"))


def test_query_of_only_stop_words_keeps_them() -> None:
    assert not query_terms("是什么").is_empty


def test_empty_query() -> None:
    assert query_terms("？！ ").is_empty


def test_fold_positions_keeps_length_and_folds_like_normalize() -> None:
    text = "ＴｉＤＢ　軟體，版本Ｖ８"
    folded = fold_positions(text)
    assert len(folded) == len(text)
    assert folded == "tidb 软体,版本v8"
    assert normalize(text).replace(" ", "") == folded.replace(" ", "")
    plain = "TiDB 的数据库"
    assert fold_positions(plain) == normalize(plain) == plain.lower()


def test_zero_width_characters_are_folded_away_in_text_and_queries() -> None:
    assert normalize("ZW\u200bMARKER") == normalize("ZWMARKER") == "zwmarker"
    assert latin_words(normalize("ZW\u200bMA\u2060RK\ufeffER")) == ["zwmarker"]
    assert query_terms("ZW\u200bMARKER").latin == query_terms("ZWMARKER").latin == ("zwmarker",)
    assert query_terms("密\u200d钥").words == query_terms("密钥").words
    assert query_terms("\u200b\u3000\u200c").is_empty


def test_every_format_character_and_hangul_filler_is_folded_away() -> None:
    assert normalize("co\u00adoper\u202eation") == normalize("cooperation")
    assert query_terms("TI\U000e0020DB").latin == ("tidb",)
    assert query_terms("密\u3164钥").words == query_terms("密钥").words


def test_blank_and_the_analysis_agree_on_what_is_invisible() -> None:
    """Every character `blank` ignores gives a query without terms (so refusing it as empty
    loses no answer); a visible character is neither blank nor, alone, folded away."""
    ignored = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and blank(chr(c))]
    assert {unicodedata.category(c) for c in ignored} == {"Cc", "Cf", "Zs", "Zl", "Zp", "Lo"}
    assert [c for c in ignored if unicodedata.category(c) == "Lo"] == list(HANGUL_FILLERS)
    for c in ignored:
        assert query_terms(f"{c}{c}").is_empty, f"U+{ord(c):04X}"
    assert not blank("\u3164a") and not query_terms("a").is_empty


def test_the_invisible_tables_match_the_unicode_database() -> None:
    """indexes.invisible holds its ranges as constants (built at import, the scan costs 0.2 s)."""
    def ranges(pred: Callable[[str], bool]) -> list[int]:
        return [c for c in range(0x110000) if pred(unicodedata.category(chr(c)))]
    assert ranges(lambda cat: cat == "Cf") == [c for a, b in FORMAT_RANGES for c in range(a, b + 1)]
    assert ranges(lambda cat: cat[0] == "Z") == [c for a, b in SEPARATOR_RANGES for c in range(a, b + 1)]
