"""gateway.documents.reading: uploaded files read by the ingest layer's readers under the type
they are sent with (raw body with Content-Type, application/octet-stream with a filename,
multipart/form-data), with the ids `kbgate index add` gives them; through the app in-process."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from gateway.core.config import DocumentsConfig
from gateway.documents.reading import KIND_CODES, file_document, upload_suffix, upload_types
from gateway.documents.wire import Refused
from indexes.ingest.formats import FORMATS
from indexes.stats import read_generation
from indexes.types import INGEST_ERROR_KINDS
from tests.documents.conftest import BASE, WRITER, DocsApp, refused, result
from tests.support.files import docx_bytes, encrypted_pdf, guide_pdf, scanned_pdf

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
OOXML = "application/vnd.openxmlformats-officedocument"
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
    errors = refused(await app.put("kb", "big.md", content=MARKDOWN, content_type="text/markdown"), 413,
                     "documents.document_too_large")
    assert "over the maximum document size of 100 bytes" in errors[0]["message"]
    errors = refused(await app.put("kb", "bad.txt", content=b"\xff\xfe", content_type="text/plain"), 422,
                     "documents.document_invalid")
    assert "not UTF-8" in errors[0]["message"]
    refused(await app.put("kb", "a.pdf", content=b"%PDF-1.7", content_type="application/x-unknown"), 415,
            "documents.media_unsupported")
    refused(await app.put("kb", "rows.jsonl", content=b'{"id": 1}', content_type="application/octet-stream",
                          **{}), 415, "documents.media_unsupported")


def test_upload_types_follow_the_format_registry() -> None:
    types = upload_types()
    assert types == {t: f.suffixes[0] for f in FORMATS for t in f.media_types}  # a format it gains comes for free
    for fmt in FORMATS:
        for suffix in fmt.suffixes:  # any of them by its filename
            assert upload_suffix("application/octet-stream", "f" + suffix.upper()) == suffix
    assert upload_suffix("application/pdf") == ".pdf" and upload_suffix(f"{OOXML}.wordprocessingml.document") == ".docx"
    assert upload_suffix("text/markdown; charset=utf-8") == ".md" and upload_suffix("text/x-rst") == ".rst"
    assert upload_suffix("application/octet-stream", "rows.jsonl") is None  # records go in a batch
    assert upload_suffix("application/octet-stream", "old.doc") is None and upload_suffix(None) is None


async def test_a_docx_and_a_pdf_are_read_with_their_headings_and_found_by_search(docs_app: Start) -> None:
    app = await docs_app()
    word = docx_bytes("证书续期手册", [("续期步骤", "到期前三十天申请新证书，再替换网关上的旧证书。"),
                                      ("回滚办法", "新证书出错时恢复备份的旧证书。")])
    data = result(await app.put("kb", "ops/cert.docx", content=word,
                                content_type=f"{OOXML}.wordprocessingml.document"))["data"]
    assert data["documents"][0]["change"] == "added" and data["committed"]
    stored = app.app.runtime.index("kb").get_document("ops/cert.docx")
    assert stored is not None and stored.title == "证书续期手册" and stored.path == "ops/cert.docx"
    assert "ops/cert.docx" in await app.search("续期步骤 申请新证书")
    hit = app.app.runtime.index("kb").search("续期步骤 申请新证书", 3)[0]
    assert hit.doc_id == "ops/cert.docx" and hit.content.startswith("续期步骤")  # its section, under its heading

    request = httpx.Request("PUT", f"http://kbgate{BASE}/kb/documents/guide.pdf",
                            files={"file": ("部署指南.pdf", guide_pdf(), "application/octet-stream")},
                            headers={"authorization": f"Bearer {WRITER}"})
    assert result(await app.http.send(request))["data"]["documents"][0]["change"] == "added"
    assert "guide.pdf" in await app.search("TOML 配置文件 重新加载")
    hit = app.app.runtime.index("kb").search("TOML 配置文件 重新加载", 3)[0]
    assert hit.doc_id == "guide.pdf" and hit.content.startswith("配置") and dict(hit.metadata)["page"] == 2


@pytest.mark.parametrize(("name", "data", "status", "code", "says"), [
    ("locked.pdf", lambda: encrypted_pdf(guide_pdf(), "s3cret"), 422, "documents.document_invalid", "password"),
    ("scan.pdf", scanned_pdf, 422, "documents.document_invalid", "scanned image without text"),
    ("bad.docx", lambda: b"PK\x03\x04 truncated zip", 422, "documents.document_invalid", "corrupt Word file"),
    ("big.pdf", guide_pdf, 413, "documents.document_too_large", "over the maximum document size"),
    ("old.doc", lambda: b"\xd0\xcf\x11\xe0 a Word 97 file", 415, "documents.media_unsupported", "type '.doc'"),
])
async def test_a_file_the_converter_refuses_is_answered_with_the_code_of_its_kind(
        docs_app: Start, name: str, data: Callable[[], bytes], status: int, code: str, says: str) -> None:
    app = await docs_app(max_document_bytes=2000 if name == "big.pdf" else None)
    before = read_generation(app.indexes / "kb")
    r = await app.http.put(f"{BASE}/kb/documents/{name}", content=data(), headers={
        "authorization": f"Bearer {WRITER}", "content-type": "application/octet-stream",
        "content-disposition": f'attachment; filename="{name}"'})
    errors = refused(r, status, code)
    assert says in errors[0]["message"]
    assert read_generation(app.indexes / "kb") == before  # nothing written


@pytest.mark.parametrize(("kind", "code"), [
    ("unsupported", "documents.media_unsupported"), ("too_large", "documents.document_too_large"),
    ("encrypted", "documents.document_invalid"), ("no_text", "documents.document_invalid"),
    ("corrupt", "documents.document_invalid"), ("unreadable", "documents.document_invalid"),
])
def test_each_kind_of_reader_refusal_has_its_code(kind: str, code: str) -> None:
    assert kind in INGEST_ERROR_KINDS and KIND_CODES.get(kind, "documents.document_invalid") == code
    with pytest.raises(Refused) as caught:  # a suffix no converter reads, read anyway: the reader's own refusal
        file_document(b"\xd0\xcf\x11\xe0", ".doc", "old.doc", DocumentsConfig())
    assert (caught.value.code, caught.value.status) == ("documents.media_unsupported", 415)
