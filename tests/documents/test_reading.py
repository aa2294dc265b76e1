"""gateway.documents.reading: uploaded files read by the ingest layer's readers under the type
they are sent with (raw body with Content-Type, application/octet-stream with a filename,
multipart/form-data), with the ids `kbgate index add` gives them; through the app in-process."""

from __future__ import annotations

import mimetypes
from collections.abc import Awaitable, Callable

import httpx
import pytest

from gateway.documents.reading import upload_suffix, upload_types
from indexes.ingest import SUFFIXES
from tests.documents.conftest import BASE, WRITER, DocsApp, refused, result

pytestmark = pytest.mark.anyio

Start = Callable[..., Awaitable[DocsApp]]
MARKDOWN = """---
title: 部署指南
url: https://docs.example.com/deploy
owner: ops
---

# 部署

## 准备环境

先安装运行时，再配置密钥文件。

## 滚动升级

逐台重启网关，观察就绪探针。
""".encode()
HTML = ("<html><head><title>升级说明</title></head><body><h1>升级</h1><h2>回滚</h2>"
        "<p>出错时回滚到上一版本。</p></body></html>")


async def test_markdown_keeps_its_front_matter_title_and_headings(docs_app: Start) -> None:
    app = await docs_app()
    data = result(await app.put("kb", "guide/deploy.md", content=MARKDOWN, content_type="text/markdown"))["data"]
    assert data["documents"][0]["change"] == "added"
    stored = app.app.runtime.index("kb").get_document("guide/deploy.md")
    assert stored is not None and stored.title == "部署指南" and stored.url == "https://docs.example.com/deploy"
    assert stored.path == "guide/deploy.md" and dict(stored.metadata)["owner"] == "ops"
    assert "准备环境" in stored.text and "滚动升级" in stored.text
    hits = app.app.runtime.index("kb").search("滚动升级 就绪探针", 3)
    assert hits[0].doc_id == "guide/deploy.md" and "滚动升级" in hits[0].content  # its section heading


async def test_html_and_text_and_octet_stream_with_a_filename(docs_app: Start) -> None:
    app = await docs_app()
    result(await app.put("kb", "upgrade.html", content=HTML.encode(), content_type="text/html; charset=utf-8"))
    assert app.app.runtime.index("kb").get_document("upgrade.html").title == "升级说明"  # type: ignore[union-attr]
    notes = "值班笔记\n夜里告警先看仪表盘。".encode()
    result(await app.put("kb", "notes.txt", content=notes, content_type="text/plain"))
    assert app.app.runtime.index("kb").get_document("notes.txt").title == "值班笔记"  # type: ignore[union-attr]
    r = await app.http.put(f"{BASE}/kb/documents/runbook.md", content=MARKDOWN, headers={
        "authorization": f"Bearer {WRITER}", "content-type": "application/octet-stream",
        "content-disposition": 'attachment; filename="runbook.md"'})
    assert result(r)["data"]["documents"][0]["change"] == "added"


async def test_multipart_with_one_file_part(docs_app: Start) -> None:
    app = await docs_app()
    request = httpx.Request("PUT", f"http://kbgate{BASE}/kb/documents/mp.md",
                            files={"file": ("deploy.md", MARKDOWN, "text/markdown")},
                            headers={"authorization": f"Bearer {WRITER}"})
    r = await app.http.send(request)
    assert result(r)["data"]["documents"][0]["change"] == "added"
    again = await app.http.send(httpx.Request("PUT", f"http://kbgate{BASE}/kb/documents/mp.md",
                                              files={"file": ("deploy.md", MARKDOWN, "text/markdown")},
                                              headers={"authorization": f"Bearer {WRITER}"}))
    assert result(again)["data"]["documents"][0]["change"] == "unchanged"
    two = httpx.Request("PUT", f"http://kbgate{BASE}/kb/documents/mp.md", data={"title": "x"},
                        files={"file": ("deploy.md", MARKDOWN, "text/markdown")},
                        headers={"authorization": f"Bearer {WRITER}"})
    refused(await app.http.send(two), 400, "documents.request_invalid")


async def test_a_file_gets_the_id_kbgate_index_add_gives_it(docs_app: Start) -> None:
    app = await docs_app()
    data = result(await app.put("kb", "ds1:guide/a.md", content=MARKDOWN, content_type="text/markdown",
                                dataset="ds1"))["data"]
    assert data["documents"][0]["id"] == "ds1:guide/a.md"
    head = result(await app.get("kb", "ds1:guide/a.md"))["data"]
    assert (head["dataset"], head["path"]) == ("ds1", "guide/a.md")
    errors = refused(await app.put("kb", "guide/b.md", content=MARKDOWN, content_type="text/markdown",
                                   dataset="ds1"), 400, "documents.request_invalid")
    assert "ds1:" in errors[0]["message"]
    front = MARKDOWN.replace(b"owner: ops", b"dataset: ds2")
    errors = refused(await app.put("kb", "c.md", content=front, content_type="text/markdown"), 400,
                     "documents.request_invalid")
    assert "'ds2:c.md'" in errors[0]["message"]
    result(await app.put("kb", "ds2:c.md", content=front, content_type="text/markdown", path="c.md"))


async def test_a_file_index_add_refuses_is_refused(docs_app: Start) -> None:
    app = await docs_app(max_document_bytes=100)
    errors = refused(await app.put("kb", "empty.md", content=b"  \n", content_type="text/markdown"), 422,
                     "documents.document_invalid")
    assert "empty file" in errors[0]["message"]
    errors = refused(await app.put("kb", "big.md", content=MARKDOWN, content_type="text/markdown"), 422,
                     "documents.document_invalid")
    assert "over the maximum document size of 100 bytes" in errors[0]["message"]
    errors = refused(await app.put("kb", "bad.txt", content=b"\xff\xfe", content_type="text/plain"), 422,
                     "documents.document_invalid")
    assert "not UTF-8" in errors[0]["message"]
    refused(await app.put("kb", "a.pdf", content=b"%PDF-1.7", content_type="application/x-unknown"), 415,
            "documents.media_unsupported")
    refused(await app.put("kb", "rows.jsonl", content=b'{"id": 1}', content_type="application/octet-stream",
                          **{}), 415, "documents.media_unsupported")


def test_upload_types_follow_the_suffixes_the_ingest_layer_reads() -> None:
    types = upload_types()
    named = {s for s in SUFFIXES if mimetypes.guess_type("f" + s, strict=False)[0]} - {".jsonl"}
    assert named <= set(types.values()) <= SUFFIXES - {".jsonl"}  # a format the ingest layer gains comes for free
    for suffix in SUFFIXES - {".jsonl"}:  # and any of them by its filename
        assert upload_suffix("application/octet-stream", "f" + suffix) == suffix
    assert upload_suffix("text/markdown; charset=utf-8") in (".md", ".markdown")
    assert upload_suffix("application/octet-stream", "a.HTML") == ".html"
    assert upload_suffix("application/octet-stream", "rows.jsonl") is None
    assert upload_suffix(None) is None
