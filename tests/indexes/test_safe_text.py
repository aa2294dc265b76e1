"""indexes.safe_text and indexes.ingest.clean: what a document may carry to a caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexes.ingest import read_paths
from indexes.safe_text import MAX_TITLE_CHARS, clean_hit, clean_text, clean_title, url_problem
from indexes.types import CoverImage, Document, Hit, IngestWarning

DIRTY = "a\x00b\x07c\x1b[31m红\x1b[0m\x1b]0;title\x07d\x7f\x85\ufffe\ufdd0\U0010ffff e\tf\ng"


def test_clean_text_removes_controls_escapes_and_non_characters() -> None:
    assert clean_text(DIRTY) == "abc红d e\tf\ng"
    plain = "正文\t保持\n原样"
    assert clean_text(plain) is plain


def test_clean_title_bounds_and_flattens() -> None:
    assert clean_title("  标题\n第二行\x07  ") == "标题 第二行"
    long = clean_title("长" * 100_000)
    assert len(long) == MAX_TITLE_CHARS and long.endswith("…")
    ok = "普通标题"
    assert clean_title(ok) is ok


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<b>x</b>",
                                 "file:///etc/passwd", "vbscript:x", "/relative/page", "//evil.example/x",
                                 "http:///nohost", "https://a.example/\x00x", "https://a.example/ x",
                                 "https://a.example/" + "x" * 3000,
                                 # a strict parser's (ada-url, WHATWG): urllib.parse took every one of these
                                 "https://a.example:99999/x", "https://a.example:8o8o/", "https://a.example:0/",
                                 "https://user:pass@a.example/", "https://@a.example/", "https://a.example/\"><b>",
                                 "https://a.example/<script>", "https://a<b.example/", "https://1.2.3.999/",
                                 "http:a.example/x", "http:/a.example/x", "https://a.example\\@b.example/",
                                 "https://a.example/{x}|^`"])
def test_url_problem_refuses_all_but_http_s(url: str) -> None:
    assert url_problem(url) is not None


@pytest.mark.parametrize("url", ["https://docs.example.com/a?b=1#c", "http://127.0.0.1:8080/x", "HTTPS://A.EXAMPLE",
                                 "https://zh.wikipedia.org/wiki/中文", "https://例子.中国/路径?q=密钥#节",
                                 "http://[::1]:65535/x", "https://a.example/it's%20ok"])
def test_url_problem_accepts_http_s(url: str) -> None:
    assert url_problem(url) is None


def _rows(tmp_path: Path, *records: dict[str, object]) -> list[Document | object]:
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return list(read_paths([tmp_path / "rows.jsonl"], url_base=None))


def test_ingest_drops_non_http_urls_and_reports_each(tmp_path: Path) -> None:
    items = _rows(tmp_path, {"id": "1", "title": "甲", "content": "x", "url": "javascript:alert(1)"},
                  {"id": "2", "title": "乙", "content": "x", "url": "data:text/html,hi"},
                  {"id": "3", "title": "丙", "content": "x", "url": "https://ok.example/3"},
                  {"id": "4", "title": "丁", "content": "x", "url": "guide/4.html"})
    urls = {d.id: d.url for d in items if isinstance(d, Document)}
    assert urls == {"1": None, "2": None, "3": "https://ok.example/3", "4": None}
    notes = [(w.file, w.reason) for w in items if isinstance(w, IngestWarning)]
    assert [f for f, _ in notes] == ["rows.jsonl:1", "rows.jsonl:2", "rows.jsonl:4"]
    assert "'javascript:alert(1)' is not an http(s) URL: not kept" in notes[0][1]
    assert "relative" in notes[2][1]
    based = list(read_paths([tmp_path / "rows.jsonl"], url_base="https://docs.example.com/site/"))
    assert {d.id: d.url for d in based if isinstance(d, Document)}["4"] == "https://docs.example.com/site/guide/4.html"


def test_ingest_removes_control_characters_and_bounds_titles_with_a_report(tmp_path: Path) -> None:
    items = _rows(tmp_path, {"id": "1", "title": "T" * 100_000, "summary": DIRTY, "content": "正文" + DIRTY})
    [doc] = [d for d in items if isinstance(d, Document)]
    assert len(doc.title) == MAX_TITLE_CHARS and doc.summary == "abc红d e\tf\ng"
    assert doc.sections[0].text == "正文abc红d e\tf\ng"
    reasons = [w.reason for w in items if isinstance(w, IngestWarning)]
    assert reasons == ["title of 100000 characters cut to 256",
                       "control characters or non-characters removed from the summary, text"]


def test_markdown_front_matter_url_is_checked_too(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nurl: 'javascript:alert(1)'\n---\n# 页\n\n正文。\n", encoding="utf-8")
    items = list(read_paths([tmp_path]))
    [doc] = [d for d in items if isinstance(d, Document)]
    assert doc.url is None and any("not kept" in w.reason for w in items if isinstance(w, IngestWarning))


def test_clean_hit_is_the_same_hit_when_clean_and_cleans_an_older_index_hit() -> None:
    ok = Hit("d", "d", 0, "标题", "摘要", "内容", 1.0, url="https://a.example/d")
    assert clean_hit(ok) is ok
    bad = clean_hit(Hit("d", "d", 0, "X" * 100_000, "摘\x1b[2J要", "内\x00容", 1.0, url="javascript:alert(1)"))
    assert (len(bad.title), bad.summary, bad.content, bad.url) == (MAX_TITLE_CHARS, "摘要", "内容", None)


def test_astral_characters_other_than_non_characters_are_kept() -> None:
    text = "扩展汉字𠀋与表情😀\n"
    assert clean_text(text) is text
    assert clean_text("𠀋\U0001fffe") == "𠀋"


def test_ingest_drops_cover_images_that_are_not_http_s_naming_the_line_and_field(tmp_path: Path) -> None:
    items = _rows(tmp_path, {"id": "1", "title": "甲", "content": "x",
                             "cover_image": "javascript:alert(document.cookie)"},
                  {"id": "2", "title": "乙", "content": "x", "cover_image": {"url": "data:image/png;base64,AAAA"}},
                  {"id": "3", "title": "丙", "content": "x", "cover_image": {"url": "https://img.example/3.png",
                                                                              "height": 10}})
    covers = {d.id: d.cover_image for d in items if isinstance(d, Document)}
    assert covers["1"] is None and covers["2"] is None
    assert covers["3"] is not None and (covers["3"].url, covers["3"].height) == ("https://img.example/3.png", 10)
    notes = [(w.file, w.reason) for w in items if isinstance(w, IngestWarning)]
    assert [f for f, _ in notes] == ["rows.jsonl:1", "rows.jsonl:2"]
    assert all(r.startswith("cover_image url ") and "not kept" in r for _, r in notes), notes


def test_clean_hit_drops_a_cover_image_an_older_index_kept() -> None:
    ok = Hit("d", "d", 0, "标题", "摘要", "内容", 1.0, cover_image=CoverImage("https://img.example/d.png"))
    assert clean_hit(ok) is ok
    for url in ("javascript:alert(document.cookie)", "data:image/png;base64,AAAA", "img/d.png"):
        assert clean_hit(Hit("d", "d", 0, "标题", "摘要", "内容", 1.0, cover_image=CoverImage(url))).cover_image is None
