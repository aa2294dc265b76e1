"""indexes.analysis: normalization, tokens, query terms."""

from __future__ import annotations

from indexes.analysis import STOP_WORDS, analyze, bigrams, index_tokens, normalize, query_terms


def test_normalize_folds_width_and_case() -> None:
    assert normalize("ＴｉＤＢ　５．０") == "tidb 5.0"
    assert normalize("MySQL") == normalize("mysql") == "mysql"


def test_normalize_traditional_to_simplified() -> None:
    assert normalize("資料庫軟體") == "资料库软体"
    assert normalize("数据库") == "数据库"  # simplified text is left alone


def test_traditional_and_simplified_tokens_meet() -> None:
    assert bigrams("臺灣的軟體") == bigrams("台湾的软体")
    assert analyze("這個軟體很好") == analyze("这个软体很好")


def test_analyze_drops_punctuation_and_whitespace() -> None:
    tokens = analyze("你好， 世界！ (TiDB)")
    assert tokens and all(t.strip() and t not in "，！()" for t in tokens)
    assert "tidb" in tokens


def test_bigrams_cjk_runs_and_words() -> None:
    assert sorted(bigrams("数据库，表 TiDB v8")) == sorted(["数据", "据库", "表", "tidb", "v8"])


def test_index_tokens_match_query_analysis() -> None:
    text = normalize("TiDB 的 tidb_auto_analyze_ratio 默认值，是 0.5！")
    words, grams = index_tokens(text)
    assert sorted(words.split()) == sorted(analyze(text, normalized=True))
    assert sorted(grams.split()) == sorted(bigrams(text, normalized=True))


def test_query_terms_dedupes_and_drops_stop_words() -> None:
    terms = query_terms("什么是数据库？数据库是什么？")
    assert len(terms.words) == len(set(terms.words))
    assert "数据库" in terms.words or "数据" in terms.words
    assert not set(terms.words) & STOP_WORDS
    assert "什么" not in terms.bigrams
    # no bigram spans a removed stop word ("么数", "是数")
    assert "么数" not in terms.bigrams and "是数" not in terms.bigrams


def test_query_of_only_stop_words_keeps_them() -> None:
    assert not query_terms("是什么").is_empty


def test_empty_query() -> None:
    assert query_terms("？！ ").is_empty


def test_normalize_positions_keeps_length_and_folds_like_normalize() -> None:
    from indexes.analysis import normalize, normalize_positions

    text = "ＴｉＤＢ　軟體，版本Ｖ８"
    folded = normalize_positions(text)
    assert len(folded) == len(text)
    assert folded == "tidb 软体,版本v8"
    assert normalize(text).replace(" ", "") == folded.replace(" ", "")
