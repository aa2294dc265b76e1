"""indexes.search through KnowledgeIndex.search, plus the corpus quality check."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gateway.evaluation.evaluation import Bm25sBaseline, answer_hit_at_k, evaluate, load_queries, mrr_at_k
from indexes.analysis import query_terms
from indexes.hits import CONTEXT_WINDOW_CHARS
from indexes.ingest import read_paths
from indexes.search import excerpt, glob_to_regex
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document, SearchBounds, SearchFilter, Section

CORPORA = Path(__file__).parents[2].parent / "shared" / "corpora"


def _doc(doc_id: str, title: str, *texts: str, **kw: object) -> Document:
    sections = tuple(Section(f"节{i}" if len(texts) > 1 else "", t) for i, t in enumerate(texts))
    return Document(doc_id, title, sections, **kw)  # type: ignore[arg-type]


@pytest.fixture(name="index")
def _index(tmp_path: Path) -> KnowledgeIndex:
    ki = IndexStore(tmp_path).create_or_open_for_write("kb", chunk_chars=100)
    ki.ingest([
        _doc("simp", "软件说明", "这个软件可以管理数据库。", path="guide/a.md", dataset="manual"),
        _doc("trad", "網路設定", "臺灣的網路設定說明。", path="guide/sub/b.md", dataset="faq"),
        _doc("latin", "TiDB 介绍", "TiDB 是一个分布式数据库，兼容 MySQL 协议。", path="c.md",
             dataset="manual"),
        _doc("multi", "长文档", "数据库备份的第一部分。" * 12, "数据库恢复的第二部分。" * 12,
             path="guide/long.md", dataset="manual"),
    ], progress=False)
    return ki


def test_traditional_query_finds_simplified_doc_and_reverse(index: KnowledgeIndex) -> None:
    assert index.search("軟件", 3)[0].doc_id == "simp"
    assert index.search("台湾的网络设定", 3)[0].doc_id == "trad"


def test_full_width_and_case_folded(index: KnowledgeIndex) -> None:
    assert index.search("ｔｉｄｂ", 3)[0].doc_id == "latin"
    assert index.search("MYSQL", 3)[0].doc_id == "latin"


def test_filter_never_changes_scores(index: KnowledgeIndex) -> None:
    plain = index.search("数据库", 10)
    everything = SearchFilter(datasets=("manual", "faq"), path_globs=("**",))
    filtered = index.search("数据库", 10, filter=everything)
    assert len(plain) >= 3
    assert [(h.id, h.score) for h in plain] == [(h.id, h.score) for h in filtered]


def test_dataset_and_path_filters(index: KnowledgeIndex) -> None:
    def ids(flt: SearchFilter) -> set[str]:
        return {h.doc_id for h in index.search("数据库 网路 说明", 10, filter=flt)}

    assert ids(SearchFilter(datasets=("faq",))) == {"trad"}
    assert ids(SearchFilter(path_globs=("guide/*",))) == {"simp", "multi"}
    assert ids(SearchFilter(path_globs=("guide/**",))) == {"simp", "trad", "multi"}
    assert ids(SearchFilter(exclude_path_globs=("guide/**",))) == {"latin"}
    assert ids(SearchFilter(datasets=())) == set()


def test_glob_to_regex() -> None:
    assert glob_to_regex("dm/**") == "dm/.*"
    assert glob_to_regex("a/*.md") == r"a/[^/]*\.md"
    assert glob_to_regex("**/x.md") == r"(.*/)?x\.md"


def test_one_hit_per_document_and_ids(index: KnowledgeIndex) -> None:
    hits = index.search("数据库", 10)
    assert len({h.doc_id for h in hits}) == len(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    multi = next(h for h in hits if h.doc_id == "multi")
    assert multi.id == f"multi#{multi.chunk}"
    assert next(h for h in hits if h.doc_id == "simp").id == "simp"
    chunks = index.search("数据库", 50, one_per_document=False)
    assert len(chunks) > len(hits)
    assert len({h.id for h in chunks}) == len(chunks)


def test_excerpts_are_bounded_in_characters(index: KnowledgeIndex) -> None:
    [hit] = index.search("数据库恢复", 1, summary_chars=30, content_chars=50)
    assert 0 < len(hit.summary) <= 30 and len(hit.content) <= 50
    assert "恢复" in hit.summary
    assert "<" not in hit.summary


def test_excerpt_is_query_biased() -> None:
    text = "无关的开头句子。" * 20 + "这里讲到了向量索引。" + "无关的结尾。" * 20
    out = excerpt(text, query_terms("向量索引"), 40)
    assert "向量索引" in out and len(out) <= 40


def test_metric_functions() -> None:
    assert mrr_at_k(["x", "x", "y", "z"], {"y"}, 10) == 0.5
    assert mrr_at_k(["x", "y"], {"y"}, 1) == 0.0
    assert answer_hit_at_k(["前文 `1` 到 `15` 后文"], ["取值 1 到 15", "1 到 15"], 5) == 1.0
    assert answer_hit_at_k(["abc"], ["x"], 5) == 0.0


@pytest.mark.corpus
@pytest.mark.parametrize("corpus", ["cmrc2018", "tidb-docs-cn"])
def test_quality_beats_bm25s_baseline(corpus: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    if not CORPORA.is_dir():
        pytest.skip(f"{CORPORA} is absent")
    source = CORPORA / corpus / ("docs.jsonl" if corpus == "cmrc2018" else "docs")
    docs = [d for d in read_paths([source]) if isinstance(d, Document)]
    queries = load_queries(CORPORA / corpus / "queries.jsonl")
    ki = IndexStore(tmp_path).create_or_open_for_write("eval")
    started = time.perf_counter()
    report = ki.ingest(docs, progress=False)
    index_s = time.perf_counter() - started

    started = time.perf_counter()
    ours = evaluate(lambda q: [(h.doc_id, f"{h.summary}\n{h.content}")
                               for h in ki.search(q, 10)], queries)
    query_ms = (time.perf_counter() - started) / len(queries) * 1000
    baseline = Bm25sBaseline(docs, chunk_chars=300)
    base = evaluate(lambda q: baseline.search(q, 50), queries)
    with capsys.disabled():
        print(f"\n{corpus}: {len(docs)} docs, {report.chunks} chunks, "
              f"{len(docs) / index_s:.0f} docs/s, {report.chunks / index_s:.0f} chunks/s, "
              f"{query_ms:.2f} ms/query (incl. excerpts)\n"
              f"  ours     MRR@10={ours.mrr:.4f} answer-hit@5={ours.answer_hit:.4f}\n"
              f"  baseline MRR@10={base.mrr:.4f} answer-hit@5={base.answer_hit:.4f}")
    assert ours.mrr > base.mrr
    assert ours.answer_hit > base.answer_hit


def test_excerpt_uses_the_stored_fold_for_positions() -> None:
    text = "第一句没有关系。" * 10 + "這裡說明軟體授權。" + "结尾无关。" * 10
    terms = query_terms("软体授权")
    from indexes.analysis import fold_positions

    with_fold = excerpt(text, terms, 30, folded=fold_positions(text))
    assert "授權" in with_fold and len(with_fold) <= 30
    assert "授權" not in excerpt(text, terms, 30)  # without it: text.lower(), no match


def test_a_fold_is_stored_only_where_lower_case_is_not_one(tmp_path: Path) -> None:
    from indexes.documents import chunks_of

    ki = IndexStore(tmp_path).create_or_open_for_write("folds")
    ki.ingest([_doc("s", "简体", "TiDB 的软件授权说明。"), _doc("t", "繁體", "TiDB 的軟體授權說明。")],
              progress=False)
    searcher = ki._index.searcher()
    [simp], [trad] = chunks_of(searcher, ki._schema, "s"), chunks_of(searcher, ki._schema, "t")
    assert simp.get_first("text_fold") is None
    assert trad.get_first("text_fold") == "tidb 的软体授权说明。"
    hit = ki.search("软体授权", 1)[0]
    assert hit.doc_id == "t" and "授權" in hit.summary


def test_further_chunks_show_their_best_matching_window(tmp_path: Path) -> None:
    first = "密钥轮换的步骤如下。" * 6
    second = "无关的开头。" * 45 + "轮换密钥时旧密钥保留一天。" + "无关的结尾。" * 45
    ki = IndexStore(tmp_path).create_or_open_for_write("windows", chunk_chars=600)
    ki.ingest([_doc("page", "手册", first, second)], progress=False)
    assert ki.stats().chunks == 2
    [hit] = ki.search("密钥轮换步骤 旧密钥保留", 1)
    assert hit.content.startswith(f"节0\n{first}\n\n")  # the best chunk whole, with its heading
    rest = hit.content[len(f"节0\n{first}\n\n"):]
    # the further chunk (553 characters) shows the window around its match, not its head
    assert "旧密钥保留一天" in rest and 0 < len(rest) <= CONTEXT_WINDOW_CHARS


def test_excluded_trees_ignore_case_in_the_index(tmp_path: Path) -> None:
    ki = IndexStore(tmp_path).create_or_open_for_write("case")
    docs = [Document(p, "密钥", (Section("", "密钥轮换的配置。"),), path=p)
            for p in ("config/a.md", "CONFIG/b.md", "Config/c.md", "guide/d.md")]
    ki.ingest(docs, progress=False)
    flt = SearchFilter(exclude_path_globs=("config/**",))
    assert [h.doc_id for h in ki.search("密钥轮换", 10, filter=flt)] == ["guide/d.md"]


def test_excluded_trees_hide_a_document_by_its_id_in_the_index(tmp_path: Path) -> None:
    """The filter, not a check after it: a document whose id lies in an excluded tree (a JSONL
    record with no path) never takes a place among the `limit` hits."""
    ki = IndexStore(tmp_path).create_or_open_for_write("ids")
    docs = [Document(i, "密钥", (Section("", "密钥轮换的配置。" * 3),), path=p)
            for i, p in (("config/a.md", ""), ("/State/b.md", ""), ("./config/c.md", "guide/c.md"))]
    docs.append(Document("guide/d.md", "密钥", (Section("", "密钥轮换。"),), path="guide/d.md"))
    ki.ingest(docs, progress=False)
    flt = SearchFilter(exclude_path_globs=("config/**", "state/**"))
    assert [h.doc_id for h in ki.search("密钥轮换", 1, filter=flt)] == ["guide/d.md"]


DEMO_DOCS = Path(__file__).parents[2] / "deploy" / "demo" / "docs"


@pytest.fixture(name="demo", scope="module")
def _demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[KnowledgeIndex, list[Document]]:
    docs = [d for d in read_paths([DEMO_DOCS]) if isinstance(d, Document)]
    ki = IndexStore(tmp_path_factory.mktemp("demo")).create_or_open_for_write("demo")
    ki.ingest(docs, progress=False)
    return ki, docs


@pytest.mark.parametrize("char", ["钥", "密", "鑰"])
def test_one_character_query_finds_every_document_containing_it(
    demo: tuple[KnowledgeIndex, list[Document]], char: str
) -> None:
    from indexes.analysis import normalize

    ki, docs = demo
    wanted = {d.id for d in docs if normalize(char) in normalize(f"{d.title}\n{d.text}")}
    assert wanted  # the demo documents do contain it
    assert {h.doc_id for h in ki.search(char, 10)} == wanted


def test_one_character_query_ranks_where_the_character_matters_first(
    demo: tuple[KnowledgeIndex, list[Document]]
) -> None:
    ki, _ = demo
    # rotation.md is about keys (密钥 in its title and eight times in its text); the others
    # mention a key once or twice
    assert ki.search("钥", 10)[0].doc_id == "ops/rotation.md"
    assert ki.search("鑰", 10)[0].doc_id == "ops/rotation.md"


class _CountingSearcher:
    """A tantivy Searcher that counts stored-document loads (`doc`)."""

    def __init__(self, searcher: object, counts: dict[str, int]) -> None:
        self._searcher, self._counts = searcher, counts

    def doc(self, address: object) -> object:
        self._counts["loads"] += 1
        return self._searcher.doc(address)  # type: ignore[attr-defined]

    def search(self, *args: object, **kw: object) -> object:
        self._counts["searches"] += 1
        return self._searcher.search(*args, **kw)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._searcher, name)


class _CountingIndex:
    def __init__(self, index: object) -> None:
        self._index = index
        self.counts = {"loads": 0, "searches": 0}

    def searcher(self) -> _CountingSearcher:
        return _CountingSearcher(self._index.searcher(), self.counts)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._index, name)


def test_per_query_work_does_not_grow_with_the_chunks_of_one_document(tmp_path: Path) -> None:
    # One document of 3,000 short chunks, each denser in the query terms than any other
    # document: every one of the best few thousand chunks belongs to it.
    huge = Document("huge", "日志", (Section("", "".join(
        f"密钥轮换密钥轮换记录第{i:05d}条。" for i in range(3000))),))
    small = [_doc(f"s{i}", f"说明{i}", f"第{i}篇说明里提到一次密钥轮换，其余都是与此无关的内容。" * 3)
             for i in range(12)]
    ki = IndexStore(tmp_path).create_or_open_for_write("big", chunk_chars=50)
    report = ki.ingest([huge, *small], progress=False)
    assert report.chunks >= 3000
    counting = _CountingIndex(ki._index)
    ki._index = counting  # type: ignore[assignment]

    hits = ki.search("密钥轮换", 10)
    assert [h.doc_id for h in hits][0] == "huge"
    assert len({h.doc_id for h in hits}) == 10
    assert "密钥轮换" in hits[0].content and len(hits[0].content) <= 1500
    per_doc = SearchBounds().max_chunks_per_document
    # Stored documents are loaded only for what is returned: each result's best chunk and
    # at most max_chunks_per_document - 1 more of its chunks for KnowledgeContent.
    assert counting.counts["loads"] <= 10 * per_doc
    assert counting.counts["searches"] <= 4


def test_title_terms_weigh_the_same_for_a_long_and_a_short_document(tmp_path: Path) -> None:
    # Every chunk carries its document's title: counted per chunk, the 30-chunk document's
    # title term would look 30 times as common as the other's and weigh less.
    filler = "".join(f"第{i}段是与问题无关的说明文字。" for i in range(30))
    ki = IndexStore(tmp_path).create_or_open_for_write("titles", chunk_chars=50)
    ki.ingest([_doc("short", "苹果", "无关的说明文字。"), _doc("long", "香蕉", filler)], progress=False)
    assert ki.stats().chunks > 10
    hits = {h.doc_id: h.score for h in ki.search("苹果 香蕉", 10)}
    assert set(hits) == {"short", "long"}
    assert hits["short"] == pytest.approx(hits["long"])


def test_common_terms_only_score_documents_that_match_a_rarer_term(tmp_path: Path) -> None:
    # 通用 is in every chunk (over COMMON_TERM_RATIO, and more than COMMON_TERM_MIN_CHUNKS)
    docs = [_doc(f"d{i}", f"文档{i}", f"通用说明第{i}篇。") for i in range(150)]
    docs.append(_doc("rare", "特别", "通用说明，并且提到罕见的钨钢。"))
    ki = IndexStore(tmp_path).create_or_open_for_write("common")
    ki.ingest(docs, progress=False)
    assert [h.doc_id for h in ki.search("通用 钨钢", 10)] == ["rare"]
    assert len(ki.search("通用", 10)) == 10  # a query of common terms only still finds them


def test_a_section_is_found_by_the_headings_above_it(tmp_path: Path) -> None:
    from indexes.ingest.markdown import parse_markdown

    page = parse_markdown("# 手册\n\n## 垃圾回收\n\n### 参数\n\n" + "保留时间默认十分钟，可以调整。" * 3
                          + "\n\n## 备份\n\n### 参数\n\n" + "并发默认四，可以调整。" * 3 + "\n", "manual.md")
    ki = IndexStore(tmp_path).create_or_open_for_write("trail", chunk_chars=50)
    ki.ingest([page], progress=False)
    [hit] = ki.search("垃圾回收 参数", 1, one_per_document=False)
    assert "保留时间" in hit.content and "并发" not in hit.content
