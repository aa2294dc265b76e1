"""indexes/synonyms.py: the Solr/Elasticsearch synonym format, refusals naming file:line, and
expansion at query time on a real index (no rebuild), weighed below the user's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexes.analysis import query_terms
from indexes.store import IndexStore
from indexes.synonyms import EXPANSION_WEIGHT, SynonymError, analysed, expand, load, parse

MISSED = "凭证更换步骤"  # shares no term with the kb index's pages


def test_two_way_and_one_way_rules() -> None:
    s = parse("# owners' words\n\n年假, 带薪年休假\n辞退, 开除 => 解除劳动合同\n", "hr.txt")
    assert [(r.term, r.adds, r.line) for r in s.rules] == [
        ("年假", ("带薪年休假",), 3), ("带薪年休假", ("年假",), 3),
        ("辞退", ("解除劳动合同",), 4), ("开除", ("解除劳动合同",), 4)]


def test_one_way_does_not_go_back() -> None:
    s = parse("辞退 => 解除劳动合同\n", "hr.txt")
    assert expand(query_terms("被辞退了"), s).expansions == (("辞退", "解除劳动合同"),)
    assert expand(query_terms("解除劳动合同"), s).expansions == ()


def test_terms_are_normalized_like_the_index() -> None:
    s = parse("軟體, 程序\nAI => 人工智能\n", "x.txt")  # traditional, upper case
    assert expand(query_terms("软体怎么装"), s).expansions == (("软体", "程序"),)
    assert expand(query_terms("ai 是什么"), s).expansions == (("ai", "人工智能"),)


def test_a_latin_term_matches_whole_words_only() -> None:
    s = parse("ai => 人工智能\n", "x.txt")
    assert expand(query_terms("email 怎么发"), s).expansions == ()


def test_expansions_are_marked_and_the_users_terms_kept() -> None:
    s = parse("凭证 => 密钥\n", "x.txt")
    plain = query_terms(MISSED)
    t = expand(plain, s)
    assert set(plain.words) <= set(t.words) and "密钥" in t.words
    assert "密钥" in t.expanded and not set(plain.words) & t.expanded


def test_no_synonyms_leaves_terms_untouched() -> None:
    t = query_terms(MISSED)
    assert expand(t, None) is t and expand(t, parse("# nothing\n", "x.txt")) is t


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("a, b\n c, , d\n", 2, "empty term"),
    ("a => b => c\n", 1, "more than one '=>'"),
    ("# fine\nalone\n", 2, "names one term"),
    ("a, " + "长" * 65 + "\n", 1, "longer than 64"),
])
def test_bad_lines_are_refused_naming_file_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(SynonymError) as err:
        parse(text, "syn/hr.txt")
    assert err.value.where == f"syn/hr.txt:{line}" and problem in err.value.problem


def test_a_file_not_utf8_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"
    p.write_bytes(b"a, b\n" + "c, 密".encode("gbk") + b"\n")
    with pytest.raises(SynonymError) as err:
        load(p, "s.txt")
    assert err.value.where == "s.txt:2"


def test_a_synonym_finds_a_missed_page_without_a_rebuild(docs_index: Path) -> None:
    store = IndexStore(docs_index)
    try:
        idx = store.open("kb")
        assert idx.search(MISSED) == []
        idx.synonyms = parse("凭证 => 密钥\n更换 => 轮换\n", "kb.txt")
        assert [h.doc_id for h in idx.search(MISSED)][:1] == ["kb-1"]
        assert analysed(MISSED, idx.synonyms).expansions == (("凭证", "密钥"), ("更换", "轮换"))
    finally:
        store.close()


def test_an_expansion_weighs_less_than_the_same_word_typed(docs_index: Path) -> None:
    store = IndexStore(docs_index)
    try:
        idx = store.open("kb")
        typed = idx.search("密钥")[0].score
        idx.synonyms = parse("凭证 => 密钥\n", "kb.txt")
        expanded = idx.search("凭证")[0].score
        assert expanded == pytest.approx(typed * EXPANSION_WEIGHT, rel=0.05)
    finally:
        store.close()
