"""indexes.ingest: readers, dispatch, errors, chunking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexes.ingest import chunk, delete_missing_problem, read_paths
from indexes.types import CoverImage, Document, IngestError, IngestWarning, Section

CORPORA = Path(__file__).parents[2].parent / "shared" / "corpora"

MARKDOWN = """---
title: 示例页面
summary: 本文介绍 `AUTO_X` 属性。
publish_time: 2024-01-02
cover_image: {url: "https://example.com/c.png", height: 10, width: 20}
dataset: manual
---

# 示例 <span class="version-mark">从 v1.0 开始引入</span>

<!-- 这是注释，不应出现 -->
{{< copyable "sql" >}}

<CustomContent platform="tidb">
内部文字保留，参见 [链接文字](/other.md) 和 ![图片说明](/img.png)。
</CustomContent>

## 第二节

这是**加粗**和*斜体*以及 `tidb_auto_analyze_ratio` 变量。

| 参数 | 默认值 |
|------|--------|
| gc-ttl | 24h |

```shell
tiup cluster display <cluster-name>
```

> **注意：**
>
> 引用文字。
"""


def _docs(items: list[Document | IngestError]) -> list[Document]:
    return [i for i in items if isinstance(i, Document)]


def _errors(items: list[Document | IngestError]) -> list[IngestError]:
    return [i for i in items if isinstance(i, IngestError)]


def test_markdown_front_matter_and_markup_stripped(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.md").write_text(MARKDOWN, encoding="utf-8")
    [doc] = _docs(list(read_paths([tmp_path])))
    assert (doc.id, doc.path) == ("manual:sub/page.md", "sub/page.md")  # its front-matter dataset names it
    assert doc.title == "示例页面"
    assert doc.summary == "本文介绍 AUTO_X 属性。"
    assert doc.publish_time == 1704153600
    assert doc.cover_image == CoverImage("https://example.com/c.png", 10, 20)
    assert doc.dataset == "manual"
    text = doc.text
    for markup in ("<!--", "注释", "{{<", "<CustomContent", "<span", "](", "![", "**", "`", "|"):
        assert markup not in text, markup
    assert "从 v1.0 开始引入" in doc.sections[0].heading
    assert "内部文字保留，参见 链接文字 和 图片说明。" in text
    assert "这是加粗和斜体以及 tidb_auto_analyze_ratio 变量。" in text
    assert "gc-ttl 24h" in text
    assert "tiup cluster display <cluster-name>" in text  # code kept verbatim
    assert "引用文字。" in text
    assert [s.heading for s in doc.sections][-1] == "第二节"


def test_markdown_without_front_matter_uses_first_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("intro\n\n# 标题一\n\n正文。\n", encoding="utf-8")
    [doc] = _docs(list(read_paths([tmp_path / "a.md"])))
    assert doc.title == "标题一" and doc.id == "a.md"


def test_jsonl_fields(tmp_path: Path) -> None:
    rec = {"id": 7, "title": "T", "content": "正文", "url": "https://x", "summary": "S",
           "publish_time": "2024-01-02T00:00:00Z", "cover_image": "https://c",
           "path": "a/b", "dataset": "d", "qa_visible": False}
    (tmp_path / "d.jsonl").write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    [doc] = _docs(list(read_paths([tmp_path / "d.jsonl"])))
    assert doc == Document("7", "T", (Section("", "正文"),), "https://x", "S", 1704153600,
                           CoverImage("https://c"), "a/b", "d", False)


def test_bad_files_are_reported_and_batch_continues(tmp_path: Path) -> None:
    good = {"id": "g", "title": "好", "content": "内容"}
    (tmp_path / "a.jsonl").write_text(
        json.dumps(good) + "\n{not json\n" + json.dumps({"title": "no id"}) + "\n"
        + json.dumps({**good, "id": "g2"}) + "\n", encoding="utf-8")
    (tmp_path / "b.md").write_bytes(b"# t\n\xff\xfe bad utf-8")
    (tmp_path / "c.md").write_text("---\ntitle: [unclosed\n---\n# x\n", encoding="utf-8")
    (tmp_path / "d.txt").write_text("\n标题行\n正文\n", encoding="utf-8")
    (tmp_path / "e.html").write_text(
        "<html><head><title>页</title><style>x{}</style></head><body><nav>菜单</nav>"
        "<h1>一</h1><p>甲</p><script>var a</script><h2>二</h2><p>乙</p></body></html>",
        encoding="utf-8")
    items = list(read_paths([tmp_path, tmp_path / "missing"]))
    docs, errors = _docs(items), _errors(items)
    assert [d.id for d in docs] == ["g", "g2", "d.txt", "e.html"]
    assert [(e.file, e.line) for e in errors] == [
        ("a.jsonl", 2), ("a.jsonl", 3), ("b.md", None), ("c.md", None),
        (str(tmp_path / "missing"), None)]
    assert "UTF-8" in errors[2].reason and "YAML" in errors[3].reason
    txt, html = docs[2], docs[3]
    assert txt.title == "标题行" and txt.text == "正文"
    assert html.title == "页" and [s.heading for s in html.sections] == ["一", "二"]
    assert "菜单" not in html.text and "var a" not in html.text


def _symlink_tree(tmp_path: Path) -> Path:
    """docs/ with a.txt, sub/b.txt, and outside/secret.txt next to docs/ (not inside it)."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("甲\n正文甲\n", encoding="utf-8")
    (docs / "sub" / "b.txt").write_text("乙\n正文乙\n", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("机密\n不应入库\n", encoding="utf-8")
    return docs


def test_symlinked_file_outside_the_folder_is_reported_not_read(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]
    assert [(e.file, e.reason) for e in _errors(items)] == [
        ("link.txt", "symlink points outside the ingested folder")]
    assert "机密" not in "".join(d.text for d in _docs(items))


def test_symlinked_folder_outside_the_folder_is_reported_not_walked(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / "ext").symlink_to(tmp_path / "outside", target_is_directory=True)
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]
    assert [(e.file, e.reason) for e in _errors(items)] == [
        ("ext", "symlink points outside the ingested folder")]


def test_relative_symlink_escaping_through_dotdot_is_reported(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / "sub" / "up.txt").symlink_to("../../outside/secret.txt")
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]
    assert [e.file for e in _errors(items)] == ["sub/up.txt"]


def test_a_symlink_to_what_the_walk_reads_anyway_is_reported_not_read_twice(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / "alias.txt").symlink_to("sub/b.txt")
    (docs / "same").symlink_to("sub", target_is_directory=True)
    (docs / "sub" / "up.md").symlink_to("../a.txt")  # another suffix, the same file
    items = list(read_paths([docs]))
    assert _errors(items) == []
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]  # each file once, under its real path
    assert [(w.where, w.reason) for w in _warnings(items)] == [
        ("alias.txt", "symlink to sub/b.txt, which is read under its own path: skipped"),
        ("same", "symlink to folder sub, which is read under its own path: skipped"),
        ("sub/up.md", "symlink to a.txt, which is read under its own path: skipped")]


def test_a_symlink_into_a_hidden_folder_is_read_once_under_the_first_symlink(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / ".versions" / "v2").mkdir(parents=True)
    (docs / ".versions" / "v2" / "c.txt").write_text("丙\n正文丙\n", encoding="utf-8")
    (docs / "current").symlink_to(".versions/v2", target_is_directory=True)
    (docs / "latest").symlink_to(".versions/v2", target_is_directory=True)
    (docs / "c.txt").symlink_to(".versions/v2/c.txt")
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "c.txt", "sub/b.txt"]
    assert [(w.where, w.reason) for w in _warnings(items)] == [
        ("current/c.txt", ".versions/v2/c.txt (through a symlink), already read as c.txt: skipped"),
        ("latest", "symlink to folder .versions/v2, already read as current: skipped")]


def test_symlink_loops_are_reported_and_the_walk_ends(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (docs / "sub" / "back").symlink_to("..", target_is_directory=True)  # docs/sub/back -> docs
    (docs / "x.txt").symlink_to("y.txt")
    (docs / "y.txt").symlink_to("x.txt")
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]
    assert [(e.file, e.reason.split(":")[0]) for e in _errors(items)] == [
        ("sub/back", "symlink loop"), ("x.txt", "symlink loop"), ("y.txt", "symlink loop")]


def test_every_symlink_skipped_is_reported_whatever_its_name(tmp_path: Path) -> None:
    # A dangling or looping symlink without a suffix we read might have led to a folder: a
    # warning names it (an error, exit 1, when it has such a suffix, as above).
    docs = _symlink_tree(tmp_path)
    (docs / "sub" / "loop").symlink_to(".", target_is_directory=True)
    (docs / "sub" / "root").symlink_to("../../docs", target_is_directory=True)
    (docs / "sub" / "gone").symlink_to("../docs")  # sub/../docs: no such folder
    (docs / "p").symlink_to("q")
    (docs / "q").symlink_to("p")
    items = list(read_paths([docs]))
    assert [d.id for d in _docs(items)] == ["a.txt", "sub/b.txt"]
    assert [(e.file, e.reason.split(":")[0]) for e in _errors(items)] == [
        ("sub/loop", "symlink loop"), ("sub/root", "symlink loop")]
    assert [(w.file, w.reason) for w in _warnings(items)] == [
        ("p", "symlink loop: skipped"), ("q", "symlink loop: skipped"),
        ("sub/gone", "symlink target does not exist or is not a file: skipped")]


def test_symlink_given_directly_is_the_users_choice(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (tmp_path / "given.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (tmp_path / "given-docs").symlink_to(docs, target_is_directory=True)
    items = list(read_paths([tmp_path / "given.txt", tmp_path / "given-docs"]))
    assert _errors(items) == []
    assert [d.id for d in _docs(items)] == ["given.txt", "a.txt", "sub/b.txt"]


def test_delete_missing_problem_refuses_a_single_file(tmp_path: Path) -> None:
    docs = _symlink_tree(tmp_path)
    (tmp_path / "docs-link").symlink_to(docs, target_is_directory=True)
    assert delete_missing_problem([docs, tmp_path / "docs-link"]) is None
    problem = delete_missing_problem([docs, str(docs / "a.txt")])
    assert problem is not None
    assert f"{docs / 'a.txt'} is not a folder" in problem and "--force" in problem
    assert str(docs) + " " not in problem  # the folder is not named as a problem
    problem = delete_missing_problem([docs / "a.txt", tmp_path / "missing"])
    assert problem is not None and "are not folders" in problem and str(tmp_path / "missing") in problem


def test_chunk_short_passage_is_one_chunk() -> None:
    doc = Document("x", "t", (Section("", "短文本。" * 10),))
    [c] = chunk(doc, max_chars=600)
    assert c.text == doc.sections[0].text and c.n == 0


def test_chunk_long_section_splits_at_sentences_with_overlap() -> None:
    sentences = [f"第{i}句话有一些内容。" for i in range(100)]
    text = "".join(sentences)
    doc = Document("x", "t", (Section("标题", text),))
    chunks = chunk(doc, max_chars=100, overlap_chars=20, merge_sections=False)
    assert len(chunks) > 5
    assert all(len(c.text) <= 100 and c.heading == "标题" for c in chunks)
    assert all(c.text.endswith("。") for c in chunks)
    assert any(c.overlap for c in chunks)
    assert "".join(c.text[c.overlap:] for c in chunks) == text
    assert [c.n for c in chunks] == list(range(len(chunks)))


def test_chunk_hard_splits_a_sentence_longer_than_max() -> None:
    doc = Document("x", "t", (Section("", "长" * 250),))
    chunks = chunk(doc, max_chars=100)
    assert [len(c.text) for c in chunks] == [100, 100, 50]


@pytest.mark.corpus
def test_corpora_ingest_without_errors() -> None:
    if not CORPORA.is_dir():
        pytest.skip(f"{CORPORA} is absent")
    for path, expected in ((CORPORA / "cmrc2018" / "docs.jsonl", 1104),
                           (CORPORA / "tidb-docs-cn" / "docs", 1204)):
        items = list(read_paths([path]))
        assert _errors(items) == []
        docs = _docs(items)
        assert len(docs) == expected == len({d.id for d in docs})
        assert all(d.text for d in docs)


def test_markdown_heading_anchor_is_dropped(tmp_path: Path) -> None:
    from indexes.ingest.markdown import read_markdown

    p = tmp_path / "a.md"
    p.write_text("# 标题\n\n## 限制 {#restrictions}\n\n正文。\n", encoding="utf-8")
    (doc,) = list(read_markdown(p, "a.md"))
    assert [s.heading for s in doc.sections if s.heading] == ["标题", "限制"]
    assert "{#" not in doc.text


def test_empty_files_are_skipped_and_reported(tmp_path: Path) -> None:
    from indexes.types import IngestWarning

    (tmp_path / "zero.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("  \n\t\n", encoding="utf-8")
    (tmp_path / "blank.html").write_text("\n\n", encoding="utf-8")
    (tmp_path / "none.jsonl").write_text("\n \n", encoding="utf-8")
    (tmp_path / "ok.md").write_text("# 标题\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [d.id for d in items if isinstance(d, Document)] == ["ok.md"]
    assert not [i for i in items if isinstance(i, IngestError)]
    assert {(w.file, w.reason) for w in items if isinstance(w, IngestWarning)} == {
        ("zero.md", "empty file (0 bytes): skipped"),
        ("blank.txt", "empty file (only whitespace): skipped"),
        ("blank.html", "empty file (only whitespace): skipped"),
        ("none.jsonl", "empty file (only whitespace): skipped"),
    }


def test_documents_over_the_maximum_size_are_refused_with_the_limit(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("# 大\n\n" + "很长的正文。" * 40, encoding="utf-8")
    (tmp_path / "small.md").write_text("# 小\n\n短。\n", encoding="utf-8")
    rows = [{"id": "r1", "content": "短"}, {"id": "r2", "content": "长" * 200}]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                                         encoding="utf-8")
    items = list(read_paths([tmp_path], max_document_bytes=300))
    assert sorted(d.id for d in items if isinstance(d, Document)) == ["r1", "small.md"]
    errors = {(e.file, e.line): e.reason for e in items if isinstance(e, IngestError)}
    assert set(errors) == {("big.md", None), ("rows.jsonl", 2)}
    assert all("over the maximum document size of 300 bytes" in r for r in errors.values())
    assert "indexes.max_document_bytes" in errors[("big.md", None)]
    # the default limit admits both
    assert len([d for d in read_paths([tmp_path]) if isinstance(d, Document)]) == 4


def test_markdown_sections_carry_the_headings_above_them(tmp_path: Path) -> None:
    from indexes.ingest.markdown import parse_markdown

    doc = parse_markdown("# 页\n\n## 配置\n\n甲\n\n### 参数\n\n乙\n\n#### 默认值\n\n丙\n\n## 示例\n\n丁\n", "a.md")
    assert [(s.heading, s.trail) for s in doc.sections] == [
        ("页", ""), ("配置", ""), ("参数", "配置"), ("默认值", "配置 / 参数"), ("示例", "")]


def _warnings(items: list[Document | IngestError | IngestWarning]) -> list[IngestWarning]:
    return [i for i in items if isinstance(i, IngestWarning)]


def _rows(*records: dict[str, object]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def test_publish_time_in_milliseconds_is_read_as_seconds_with_a_warning_naming_both(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(_rows(
        {"id": "a", "title": "A", "content": "甲", "publish_time": 1_764_580_000_000},
        {"id": "b", "title": "B", "content": "乙", "publish_time": "1764580000123"},
        {"id": "c", "title": "C", "content": "丙", "publish_time": 1_764_580_000}), encoding="utf-8")
    (tmp_path / "page.md").write_text("---\ntitle: P\ntags: [x]\npublish_time: 1764580000000\n---\n正文\n",
                                      encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [(d.id, d.publish_time) for d in _docs(items)] == [
        ("page.md", 1_764_580_000), ("a", 1_764_580_000), ("b", 1_764_580_000), ("c", 1_764_580_000)]
    assert [(w.where, w.reason) for w in _warnings(items)] == [
        ("page.md:4", "'publish_time' 1764580000000 read as milliseconds: kept as 1764580000 "
                      "(2025-12-01T09:06:40Z); publish_time is unix seconds"),
        ("rows.jsonl:1", "'publish_time' 1764580000000 read as milliseconds: kept as 1764580000 "
                         "(2025-12-01T09:06:40Z); publish_time is unix seconds"),
        ("rows.jsonl:2", "'publish_time' 1764580000123 read as milliseconds: kept as 1764580000 "
                         "(2025-12-01T09:06:40Z); publish_time is unix seconds")]
    assert _errors(items) == []


@pytest.mark.parametrize("bad", ['"not-a-date"', "1.5e300", "100000000000000000000", "9000000000000000000",
                                 "Infinity", "NaN", "-1000000000000000", '"9999-12-31T23:59:59-01:00"', "true"])
def test_a_publish_time_that_is_no_time_refuses_only_its_record(tmp_path: Path, bad: str) -> None:
    good = _rows({"id": "g1", "title": "好", "content": "内容"})
    (tmp_path / "rows.jsonl").write_text(
        good + '{"id": "bad", "title": "坏", "content": "x", "publish_time": ' + bad + "}\n" + good.replace("g1", "g2"),
        encoding="utf-8")
    items = list(read_paths([tmp_path / "rows.jsonl"]))
    assert [d.id for d in _docs(items)] == ["g1", "g2"]
    [err] = _errors(items)
    assert err.where == "rows.jsonl:2" and "'publish_time'" in err.reason


def test_a_front_matter_publish_time_that_is_no_time_refuses_the_file_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: A\ndate: 100000000000000000000\n---\n正文\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("---\ntitle: B\npublish_time: .inf\n---\n正文\n", encoding="utf-8")
    (tmp_path / "c.md").write_text("---\ntitle: C\npublish_time: not-a-date\n---\n正文\n", encoding="utf-8")
    (tmp_path / "d.md").write_text("# D\n正文\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [d.id for d in _docs(items)] == ["d.md"]
    assert [(e.where, e.reason.split(" ")[0], e.reason.endswith("(front matter line 3)")) for e in _errors(items)] == [
        ("a.md", "'date'", True), ("b.md", "'publish_time'", True), ("c.md", "'publish_time'", True)]


def test_a_front_matter_field_of_the_wrong_type_is_dropped_and_the_page_kept(tmp_path: Path) -> None:
    front = "---\ntitle: 页面\ncover_image: 5\nurl: [1, 2]\nsummary: {x: 1}\n---\n"
    (tmp_path / "a.md").write_text(front + "# 页面\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    [doc] = _docs(items)
    assert (doc.title, doc.cover_image, doc.url, doc.summary) == ("页面", None, None, None)
    notes = sorted((w.where, w.reason) for w in items if isinstance(w, IngestWarning))
    assert notes == [("a.md:3", "front matter 'cover_image' must be a url string or an object with 'url': not kept"),
                     ("a.md:4", "front matter 'url' must be a string: not kept"),
                     ("a.md:5", "front matter 'summary' must be a string: not kept")]
    # who may see a page is never guessed: a wrong dataset or qa_visible still refuses it
    (tmp_path / "a.md").write_text("---\nqa_visible: maybe\n---\n# 页面\n\n正文。\n", encoding="utf-8")
    assert not _docs(list(read_paths([tmp_path]))) and _errors(list(read_paths([tmp_path])))


def test_a_jsonl_field_of_the_wrong_type_is_dropped_and_the_record_kept(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "1", "title": "甲", "content": "内容",
                                                     "cover_image": 5, "url": 7}) + "\n", encoding="utf-8")
    items = list(read_paths([tmp_path / "rows.jsonl"]))
    [doc] = _docs(items)
    assert (doc.cover_image, doc.url) == (None, None)
    assert sorted(w.reason for w in items if isinstance(w, IngestWarning)) == [
        "'cover_image' must be a url string or an object with 'url': not kept", "'url' must be a string: not kept"]


def test_a_cover_image_size_that_is_no_integer_names_its_field(tmp_path: Path) -> None:
    """It said "invalid literal for int() with base 10: 'wide'", naming no field."""
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "1", "content": "内容", "cover_image": {
        "url": "https://example.com/c.png", "width": "wide", "height": 10}}) + "\n", encoding="utf-8")
    (tmp_path / "a.md").write_text("---\ncover_image: {url: 'https://example.com/c.png', height: 1.5x}\n---\n"
                                   "# 页面\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [d.cover_image for d in _docs(items)] == [None, None]
    reasons = [w.reason for w in items if isinstance(w, IngestWarning)]
    assert "front matter 'cover_image.height' must be an integer, not '1.5x': not kept" in reasons, reasons
    assert "'cover_image.width' must be an integer, not 'wide': not kept" in reasons, reasons
    assert not any("invalid literal" in r for r in reasons)


def test_every_file_of_an_unsupported_type_in_a_folder_is_reported(tmp_path: Path) -> None:
    for name in ("a.doc", "b.adoc", "c.odt", "d.json", "e.yaml", "Makefile", "ok.md"):
        (tmp_path / name).write_text("# 内容\n\n正文。\n", encoding="utf-8")
    (tmp_path / "link.doc").symlink_to(tmp_path / "a.doc")
    items = list(read_paths([tmp_path]))
    assert [d.id for d in _docs(items)] == ["ok.md"]
    skipped = {w.where: w.reason for w in items if isinstance(w, IngestWarning)}
    assert sorted(skipped) == ["Makefile", "a.doc", "b.adoc", "c.odt", "d.json", "e.yaml", "link.doc"]
    assert skipped["a.doc"].startswith("unsupported file type '.doc': skipped (kbgate reads .docx, .htm, .html, "
                                       ".jsonl, .markdown, .md, .pdf, .pptx")
    assert skipped["Makefile"].startswith("unsupported file type '(none)': skipped")


@pytest.mark.parametrize("bad", ["w\u001b[2Jx", "\u200bconfig/zw.md", "a\u202egpj.exe", "tab\there", "line\nbreak",
                                 "x\ufffe", "soft\u00adhyphen", "tag\U000e0020"])
def test_an_id_or_path_holding_an_invisible_character_refuses_its_record(tmp_path: Path, bad: str) -> None:
    (tmp_path / "ids.jsonl").write_text(_rows({"id": bad, "content": "甲"}, {"id": "ok", "path": bad, "content": "乙"},
                                              {"id": "fine", "content": "丙"}), encoding="utf-8")
    items = list(read_paths([tmp_path / "ids.jsonl"]))
    assert [d.id for d in _docs(items)] == ["fine"]
    errors = _errors(items)
    assert [(e.line, e.reason.split(" holds ")[0]) for e in errors] == [(1, "bad JSON record: 'id'"),
                                                                         (2, "bad JSON record: 'path'")]
    assert all("(U+" in e.reason for e in errors)
    assert not any(bad in e.reason for e in errors)  # named by code point, never the text


def test_a_file_whose_name_holds_a_control_character_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a\u001b[2J.md").write_text("# 甲\n\n正文。\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# 乙\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [d.id for d in _docs(items)] == ["b.md"]
    [err] = _errors(items)
    assert "U+001B" in err.reason and "skipped" in err.reason


def test_a_dataset_holding_a_colon_is_refused_from_a_record_front_matter_and_the_flag(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(_rows({"id": "x.md", "dataset": "a:b", "content": "甲"},
                                            {"id": "b:x.md", "dataset": "a", "content": "乙"}), encoding="utf-8")
    items = list(read_paths([tmp_path / "d.jsonl"]))
    assert [d.id for d in _docs(items)] == ["b:x.md"]
    [err] = _errors(items)
    assert err.line == 1 and "'dataset' holds ':'" in err.reason
    (tmp_path / "p.md").write_text("---\ndataset: 'a:b'\n---\n# 页\n\n正文。\n", encoding="utf-8")
    [err] = _errors(list(read_paths([tmp_path / "p.md"])))
    assert err.file == "p.md" and "dataset holds ':'" in err.reason
    items = list(read_paths([tmp_path / "p.md"], dataset="x:y"))
    assert not _docs(items) and _errors(items)[0].file == "--dataset" and "holds ':'" in _errors(items)[0].reason


def test_an_id_path_or_dataset_over_the_id_limit_refuses_its_record(tmp_path: Path) -> None:
    """Tantivy drops a term over 65,530 bytes: such an id could never be replaced nor deleted.
    Ids, paths and datasets are limited to MAX_ID_BYTES UTF-8 bytes, counted in bytes."""
    from indexes.ingest.fields import MAX_ID_BYTES
    assert MAX_ID_BYTES == 1024
    long_cjk = "长" * 342  # 342 characters, 1,026 bytes
    (tmp_path / "ids.jsonl").write_text(_rows(
        {"id": "L" * 70000, "content": "甲"}, {"id": long_cjk, "content": "乙"},
        {"id": "ok", "path": "p" * 1025, "content": "丙"}, {"id": "ok2", "dataset": "d" * 1025, "content": "丁"},
        {"id": "L" * 1024, "path": "长" * 341, "content": "戊"}), encoding="utf-8")
    items = list(read_paths([tmp_path / "ids.jsonl"]))
    assert [d.id for d in _docs(items)] == ["L" * 1024]
    errors = _errors(items)
    assert [(e.line, e.reason.split(" is ")[0]) for e in errors] == [
        (1, "bad JSON record: 'id'"), (2, "bad JSON record: 'id'"), (3, "bad JSON record: 'path'"),
        (4, "bad JSON record: 'dataset'")]
    assert "is 70000 bytes long (UTF-8), over the limit of 1024 bytes" in errors[0].reason
    assert "is 1026 bytes long" in errors[1].reason
    assert all(len(e.reason) < 300 for e in errors)  # the id is named by its size, never echoed


def test_a_tree_file_whose_id_is_over_the_id_limit_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "a"
    for part in ("x" * 250, "y" * 250, "z" * 250, "w" * 250):
        deep = deep / part
    deep.mkdir(parents=True)
    (deep / "page.md").write_text("# 甲\n\n正文。\n", encoding="utf-8")  # x…/y…/z…/w…/page.md: 1,011 bytes
    (tmp_path / "a" / "b.md").write_text("# 乙\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path / "a"]))
    assert sorted(d.id for d in _docs(items)) == ["b.md", (deep / "page.md").relative_to(tmp_path / "a").as_posix()]
    items = list(read_paths([tmp_path / "a"], dataset="d" * 20))  # 'ddd…:' makes it 1,032 bytes
    assert [d.id for d in _docs(items)] == ["d" * 20 + ":b.md"]
    [err] = _errors(items)
    assert "document id is 1032 bytes long (UTF-8), over the limit of 1024 bytes" in err.reason


@pytest.mark.parametrize(("width", "says"), [
    (2 ** 63, "'cover_image.width' 9223372036854775808 is out of range 1..100000 (pixels)"),
    (-1, "'cover_image.width' -1 is out of range 1..100000 (pixels)"),
    (0, "'cover_image.width' 0 is out of range 1..100000 (pixels)"),
    ("99999999999999999999999", "'cover_image.width' 99999999999999999999999 is out of range 1..100000 (pixels)"),
])
def test_a_cover_image_size_out_of_range_is_not_kept_and_the_rest_is_indexed(
        tmp_path: Path, width: object, says: str) -> None:
    """2^63 crashed the write (tantivy: "expected an i64 int"), aborting the whole run; -1 was
    kept and served as "Width": -1; a huge integer string was refused as "a lone surrogate"."""
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "1", "content": "内容", "cover_image": {
        "url": "https://a.example.com/c.png", "width": width, "height": 10}}) + "\n", encoding="utf-8")
    (tmp_path / "a.md").write_text(f"---\ncover_image:\n  url: https://a.example.com/c.png\n  width: {width}\n---\n"
                                   "# 页面\n\n正文。\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# 另一页\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    assert [d.cover_image for d in _docs(items)] == [None, None, None]
    reasons = sorted(w.reason for w in items if isinstance(w, IngestWarning))
    assert reasons == [f"{says}: not kept", f"front matter {says}: not kept"], reasons


def test_cover_image_sizes_in_range_are_kept() -> None:
    from indexes.ingest.fields import parse_cover_image
    with pytest.raises(ValueError, match=r"'cover_image.height' 99999999999999999999… is out of range 1..100000"):
        parse_cover_image({"url": "https://a.example.com/c.png", "height": "9" * 5000})
    assert parse_cover_image({"url": "https://a.example.com/c.png", "width": "100000", "height": 1}) == CoverImage(
        "https://a.example.com/c.png", 1, 100_000)
