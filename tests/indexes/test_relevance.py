"""indexes/relevance.py: the lexical relevance (content words, their weights and domain, the share a
chunk covers), the hybrid mix and the lexical share of the fusion."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexes import relevance
from indexes.analysis import normalize
from indexes.relevance import ENGLISH_FUNCTION_WORDS, Question, Unit, content_units, domain, question
from indexes.store import IndexStore
from indexes.types import Document, Section


def test_content_units_keep_what_the_question_is_about() -> None:
    units = content_units(normalize("请问今天北京的天气怎么样，要不要带伞？"))
    # 请问, 的, 怎么样 gone; 要不要 (A-not-A) counts as 要, a stop word
    assert units == ["今天", "北京", "天气", "带伞"]
    assert content_units(normalize("怎么判断西瓜熟没熟")) == ["判断", "西瓜", "熟"]  # 熟没熟 → 熟
    assert content_units(normalize("孩子发烧38度5")) == ["孩子", "发烧", "度"]  # numbers say which one, not what about
    assert content_units(normalize("no-sudo 部署 XDG_RUNTIME_DIR is not set")) == [
        "sudo", "部署", "xdg", "runtime", "dir", "set"]  # identifiers split, English function words gone
    assert {"is", "not", "the"} <= ENGLISH_FUNCTION_WORDS and "br" not in ENGLISH_FUNCTION_WORDS


def test_domain_is_even_odds_where_the_corpus_uses_a_word_as_general_chinese_does() -> None:
    # D documents hold the word, E would in general Chinese of the index's shape.
    assert domain(10, 10.0) == pytest.approx(0.5) and domain(0, 0.0) == pytest.approx(0.5)
    assert domain(400, 30.0) > 0.9 > 0.1 > domain(2, 66.0)
    assert 0.0 < domain(-1, -1.0) < 1.0  # degenerate inputs stay inside 0..1


def test_one_document_moves_a_words_domain_by_at_most_the_documented_bound() -> None:
    # One document added moves D by 0 or 1 and E by 0..1 (it adds 1 - (1 - p)^(n L) < 1 however
    # long it is): d moves by at most 1 / (D + E + 2 PRIOR) <= 1 / (2 PRIOR) (docs/search-quality.md).
    worst = 0.0
    for d_ in (0, 1, 2, 5, 30, 400):
        for e in (0.0, 0.01, 0.5, 1.0, 3.0, 66.0, 1000.0):
            for step_d in (0, 1):
                for step_e in (0.0, 0.25, 0.5, 0.999):
                    moved = abs(domain(d_ + step_d, e + step_e) - domain(d_, e))
                    assert moved <= 1.0 / (d_ + e + 2 * relevance.PRIOR) + 1e-12
                    worst = max(worst, moved)
    assert worst <= 1.0 / (2 * relevance.PRIOR) == 0.125


def test_about_is_the_weighted_share_of_the_question_a_chunk_holds() -> None:
    q = Question([Unit("红烧肉", 14.0, 0.9, False), Unit("时间", 6.0, 0.5, False), Unit("tidb", 10.0, 1.0, True)])
    assert q.about("炖多长时间") == pytest.approx(6.0 * 0.5 / 30.0)  # only the everyday word, discounted
    assert q.about("红烧肉 时间 tidb_x") == pytest.approx((14 * 0.9 + 3.0 + 10.0) / 30.0)
    assert q.about("xtidb tidbs") == 0.0  # a Latin word matches as a whole word only
    assert Question([]).about("anything") == 0.0


def test_question_splits_a_made_up_word_the_index_does_not_hold() -> None:
    held = {"说": 50, "忙": 5, "公司": 900}
    q = question("公司说太忙", lambda term, fields: held.get(term, 0), lambda p: 100.0 * p)
    texts = [u.text for u in q.units]
    assert "公司" in texts and "说太忙" not in texts and "忙" in texts
    by = {u.text: u for u in q.units}
    assert by["公司"].domain > by["忙"].domain and by["公司"].weight < by["忙"].weight


def test_hybrid_mixes_the_two_judges_and_the_fusion_share_is_not_clamped() -> None:
    assert relevance.hybrid(0.4, 0.65) == pytest.approx(relevance.LEXICAL_SHARE * 0.4 + (1 - relevance.LEXICAL_SHARE))
    assert relevance.hybrid(0.4, None) == pytest.approx(relevance.LEXICAL_SHARE * 0.4)
    assert relevance.lexical(25.0, 10.0) == 2.5 and relevance.lexical(5.0, 0.0) == 0.0


def _doc(doc_id: str, title: str, text: str) -> Document:
    return Document(id=doc_id, title=title, sections=(Section("", text),))


def test_an_offtopic_question_scores_under_an_ontopic_one_on_a_real_index(tmp_path: Path) -> None:
    # 400 pages of rules on ten topics, the labour ones on 40 of them; one page mentions the weather.
    topics = ["用人单位与劳动者解除劳动合同，应当向劳动者支付经济补偿。", "机动车驾驶人应当遵守道路交通安全法律。",
              "出租人应当履行租赁物的维修义务。", "经营者应当保证其提供的商品符合保障人身安全的要求。",
              "纳税人应当按照规定的期限办理纳税申报。", "学校应当保障未成年学生的休息和娱乐。",
              "医疗机构应当建立健全病历管理制度。", "个人信息处理者应当采取必要措施保障个人信息安全。",
              "当事人对判决不服的，有权在十五日内向上一级人民法院提起上诉。", "物业服务人应当按照约定提供服务。"]
    docs = [_doc(f"d{i}.md", f"规定第{i}号", (topics[i % 10] + f"第{i}条规定了具体办法，有关部门负责监督检查。") * 4
                 + ("遇有恶劣天气，应当暂停户外作业。" if i == 7 else "")) for i in range(400)]
    store = IndexStore(tmp_path)
    store.create_or_open_for_write("laws").ingest(docs, progress=False)
    idx = store.open("laws")
    on = idx.search("公司解除劳动合同要给经济补偿吗", 3)
    off = idx.search("今天北京的天气怎么样，要不要带伞", 3)
    assert on and off  # BM25 finds a chunk for both
    # 天气 alone: an everyday word (used here about as often as in general Chinese: d ≈ 0.5), and
    # the words that make the question specific (带伞) unmatched.
    assert on[0].relevance > 0.5 > 0.2 > off[0].relevance
    assert idx.search("今天北京的天气怎么样，要不要带伞", 3, floor=0.2) == []
    assert [h.id for h in idx.search("公司解除劳动合同要给经济补偿吗", 3, floor=0.2)] == [h.id for h in on]


def test_the_dense_side_reads_a_cosine_on_its_models_line() -> None:
    assert relevance.dense(0.30) == 0.0 and relevance.dense(0.65) == 1.0  # use-multilingual-v3's line
    assert relevance.dense(0.91, (0.87, 0.95)) == pytest.approx(0.5)  # e5's band is another
    assert relevance.hybrid(0.0, 0.91, (0.87, 0.95)) == pytest.approx((1 - relevance.LEXICAL_SHARE) * 0.5)


def test_a_synonym_of_the_index_counts_for_the_word_it_stands_for() -> None:
    held = {"凭证": 0, "密钥": 300, "步骤": 200}
    documents_with = lambda term, fields: held.get(term, 0)  # noqa: E731
    plain = question("凭证更换步骤", documents_with, lambda p: 1000.0 * p)
    expanded = question("凭证更换步骤", documents_with, lambda p: 1000.0 * p, expansions=(("凭证", "密钥"),))
    page = "轮换密钥的步骤"
    assert expanded.about(page) > plain.about(page)  # 密钥 found for 凭证, at EXPANSION_WEIGHT
    assert expanded.about("凭证的步骤") == pytest.approx(plain.about("凭证的步骤"))  # the word itself: as before


def test_a_numeral_in_the_question_picks_its_page_on_a_real_index(tmp_path: Path) -> None:
    # "页面六" tied 页面四/五/六 at relevance 1.0, and "六" alone was under every floor
    index = IndexStore(tmp_path).create_or_open_for_write("pages")
    index.ingest([_doc(f"p{n}", f"页面{n}", f"这是第{n}个页面的说明文字。") for n in "四五六"], progress=False)
    store = IndexStore(tmp_path).open("pages")
    first, *others = store.search("页面六", 5)
    assert first.doc_id == "p六" and all(h.relevance < first.relevance - 0.2 for h in others)
    [alone] = store.search("六", 5)
    assert alone.doc_id == "p六" and alone.relevance > 0.5
    assert "六" in content_units(normalize("页面六"))
