"""gateway.documents.handlers: the document API in-process (the app under its lifespan, a real
Tantivy index, a real Redis for the tool API's search): writes answered with what changed and
the commit, idempotent by id and content hash, refused whole for one bad document, and the
grant, the index and the datasets of the client's policy."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import quote

import anyio
import orjson
import pytest

from indexes.records import document_revision
from indexes.stats import read_generation
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.documents.conftest import BASE, LONG, NARROW, OTHER, READER, WRITER, DocsApp, refused, result

pytestmark = pytest.mark.anyio

Start = Callable[..., Awaitable[DocsApp]]
FAQ = {"title": "退款政策", "content": "购买后七天内可以无理由退款，超过七天需要联系客服。", "url": "https://cms.example.com/faq/7",
       "publish_time": "2026-01-15", "category": "售后"}


async def test_a_put_is_answered_after_its_commit_and_seen_by_the_next_search(docs_app: Start) -> None:
    app = await docs_app()
    before = read_generation(app.indexes / "kb")
    body = result(await app.put("kb", "faq-7", FAQ))
    assert body["tool"] == "documents.put"
    data = body["data"]
    assert data["committed"] is True and data["commit"] == read_generation(app.indexes / "kb") > (before or 0)
    assert data["documents"] == [{"id": "faq-7", "change": "added", "revision": data["documents"][0]["revision"]}]
    assert data["counts"]["added"] == 1 and data["visibleWithinSeconds"] == 0.5
    assert "faq-7" in await app.search("退款政策")  # this worker reloads at once
    head = result(await app.get("kb", "faq-7"))["data"]
    assert head["revision"] == data["documents"][0]["revision"] and head["appliedCommit"] == data["commit"]
    assert head["appliedAt"].endswith("Z") and head["id"] == "faq-7"
    line = [a for a in app.audit() if a["tool"] == "documents.put"][-1]
    assert line["wing"] == "documents" and line["outcome"] == "passed" and line["index"] == "kb"


async def test_a_retried_put_is_unchanged_and_makes_no_commit(docs_app: Start) -> None:
    app = await docs_app()
    first = result(await app.put("kb", "faq-7", FAQ))["data"]
    generation = read_generation(app.indexes / "kb")
    again = result(await app.put("kb", "faq-7", FAQ))["data"]
    assert again["documents"][0]["change"] == "unchanged" and again["committed"] is False
    assert again["commit"] == first["commit"] == generation == read_generation(app.indexes / "kb")
    changed = result(await app.put("kb", "faq-7", {**FAQ, "content": "购买后十四天内可以退款。"}))["data"]
    assert changed["documents"][0]["change"] == "updated" and changed["commit"] > first["commit"]


async def test_delete_then_its_retry_then_get_is_not_found(docs_app: Start) -> None:
    app = await docs_app()
    result(await app.put("kb", "faq-7", FAQ))
    deleted = result(await app.delete("kb", "faq-7"))["data"]
    assert deleted["documents"] == [{"id": "faq-7", "change": "deleted", "revision": None}] and deleted["committed"]
    again = result(await app.delete("kb", "faq-7"))["data"]
    assert again["documents"][0]["change"] == "absent" and again["committed"] is False
    assert again["commit"] == deleted["commit"]
    refused(await app.get("kb", "faq-7"), 404, "documents.not_found")
    assert "faq-7" not in await app.search("退款政策")


async def test_no_write_to_an_index_not_made_yet_creates_it(docs_app: Start) -> None:
    # A PUT to a mistyped index made a new, empty index holding that one document.
    app = await docs_app()
    data = result(await app.delete("fresh", "x"))["data"]
    assert data["documents"] == [{"id": "x", "change": "absent", "revision": None}] and data["commit"] is None
    assert not (app.indexes / "fresh").exists()
    refused(await app.get("fresh", "x"), 404, "documents.not_found")
    doc = {"title": "新索引", "content": "第一篇文档建立了这个索引。"}
    [error] = refused(await app.put("fresh", "x", doc), 404, "documents.index_not_found")
    assert "'fresh'" in error["message"] and "kbgate index create fresh" in error["message"]
    refused(await app.batch("fresh", {"upserts": [{"id": "x", **doc}]}), 404, "documents.index_not_found")
    assert not (app.indexes / "fresh").exists()
    # a granted name no index may have answered 500 (IndexStoreError): now an index that does not exist
    assert result(await app.delete(LONG, "x"))["data"]["documents"][0]["change"] == "absent"
    refused(await app.get(LONG, "x"), 404, "documents.not_found")
    refused(await app.put(LONG, "x", doc), 404, "documents.index_not_found")
    refused(await app.batch(LONG, {"upserts": [{"id": "x", **doc}]}), 404, "documents.index_not_found")
    IndexStore(app.indexes).create_or_open_for_write("fresh").close()  # made on purpose (kbgate index create)
    data = result(await app.put("fresh", "x", doc))["data"]
    assert data["documents"][0]["change"] == "added" and (app.indexes / "fresh" / "meta.json").is_file()


async def test_a_json_document_is_read_as_kbgate_index_add_reads_a_jsonl_record(docs_app: Start) -> None:
    app = await docs_app()
    record = {**FAQ, "publish_time": 1_764_580_000_000, "cover_image": "data:image/png;base64,AAAA",
              "nested": {"a": 1}, "url": "javascript:alert(1)"}
    data = result(await app.put("kb", "faq-8", record))["data"]
    messages = " | ".join(w["message"] for w in data["warnings"])
    assert "read as milliseconds: kept as 1764580000" in messages
    assert "'nested'" in messages and "not kept" in messages
    assert "cover_image url" in messages and "is not an http(s) URL" in messages
    stored = app.app.runtime.index("kb").get_document("faq-8")
    assert stored is not None and stored.publish_time == 1_764_580_000 and stored.url is None
    assert dict(stored.metadata)["category"] == "售后"
    expected = Document("faq-8", FAQ["title"], (Section("", FAQ["content"]),), publish_time=1_764_580_000,
                        metadata=(("category", "售后"),))
    assert data["documents"][0]["revision"] == document_revision(expected)


async def test_a_cover_size_out_of_range_is_not_kept_and_the_document_written(docs_app: Start) -> None:
    """A width of 2^63 crashed the write in Tantivy: answered 503 "index cannot be written"."""
    app = await docs_app()
    record = {"content": "y", "cover_image": {"url": "https://a.example.com/c.png", "width": 2 ** 63}}
    data = result(await app.put("kb", "x", record))["data"]
    messages = " | ".join(w["message"] for w in data["warnings"])
    assert "'cover_image.width' 9223372036854775808 is out of range 1..100000 (pixels): not kept" in messages
    assert data["documents"][0]["change"] == "added"
    assert app.app.runtime.index("kb").get_document("x") is not None


@pytest.mark.parametrize(("record", "doc_id", "says"), [
    ({"content": "x", "publish_time": 1.5e300}, "bad-time", "is outside the times kept"),
    ({"content": "x", "publish_time": "昨天"}, "bad-time2", "is not an ISO date"),
    ({"content": "x", "dataset": "a:b"}, "bad-dataset", "holds ':'"),
    ({"content": "x", "qa_visible": "maybe"}, "bad-visible", "'qa_visible' must be a boolean"),
    ({"content": 5}, "bad-content", "'title' and 'content' must be strings"),
    ({"content": "x"}, "bad%E2%80%8Bid", "invisible characters"),
])
async def test_what_index_add_refuses_is_refused_naming_the_document(docs_app: Start, record: dict[str, object],
                                                                     doc_id: str, says: str) -> None:
    app = await docs_app()
    before = read_generation(app.indexes / "kb")
    errors = refused(await app.put("kb", doc_id, record), 422, "documents.document_invalid")
    assert says in errors[0]["message"] and errors[0]["id"]
    assert read_generation(app.indexes / "kb") == before


async def test_sizes_the_body_and_the_id_of_a_document(docs_app: Start) -> None:
    app = await docs_app(max_document_bytes=2000,
                         documents={"max_body_bytes": 4096})
    errors = refused(await app.put("kb", "big", {"content": "长" * 1000}), 413, "documents.document_too_large")
    assert "over the maximum document size of 2000 bytes" in errors[0]["message"]
    refused(await app.put("kb", "huge", {"content": "x" * 5000}), 413, "documents.request_too_large")
    errors = refused(await app.put("kb", "a", {"id": "b", "content": "x"}), 400, "documents.request_invalid")
    assert "'a'" in errors[0]["message"]
    refused(await app.put("kb", "a", content=b"{not json"), 400, "documents.request_invalid")
    refused(await app.put("kb", "a", content=b"{}", content_type="application/zip"), 415, "documents.media_unsupported")
    refused(await app.put("kb", "a", FAQ, unknown="1"), 400, "documents.request_invalid")
    refused(await app.put("kb", "a", FAQ, path="x.md"), 400, "documents.request_invalid")


async def test_a_batch_with_one_invalid_document_is_refused_whole_naming_it(docs_app: Start) -> None:
    app = await docs_app()
    result(await app.put("kb", "keep", {"title": "保留", "content": "这一篇不能被删掉。"}))
    before = read_generation(app.indexes / "kb")
    body = {"upserts": [{"id": "b1", "content": "第一篇"}, {"id": "b2", "content": "x", "publish_time": 1.5e300},
                        {"id": "b3", "content": "第三篇"}, {"id": "b4", "content": "x", "dataset": "a:b"}],
            "deletes": ["keep"]}
    errors = refused(await app.batch("kb", body), 422, "documents.document_invalid")
    assert [e["id"] for e in errors] == ["b2", "b4"]
    assert read_generation(app.indexes / "kb") == before
    for doc_id in ("b1", "b3"):
        refused(await app.get("kb", doc_id), 404, "documents.not_found")
    result(await app.get("kb", "keep"))


async def test_a_batch_applies_its_upserts_and_deletes_in_one_commit(docs_app: Start,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    app = await docs_app()
    result(await app.put("kb", "old", {"title": "旧文", "content": "旧的内容。"}))
    caplog.set_level(logging.INFO, logger="kbgate.documents")
    caplog.clear()
    body = {"upserts": [{"id": "n1", "title": "新一", "content": "新的第一篇。"}, {"id": 7, "content": "数字编号"}],
            "deletes": ["old", "never-was"]}
    data = result(await app.batch("kb", body))["data"]
    assert [(d["id"], d["change"]) for d in data["documents"]] == [
        ("n1", "added"), ("7", "added"), ("old", "deleted"), ("never-was", "absent")]
    assert data["commit"] == read_generation(app.indexes / "kb")
    commits = [r for r in caplog.records if r.getMessage() == "document changes committed"]
    assert [getattr(r, "commit", None) for r in commits] == [data["commit"]]  # one commit for the four
    again = result(await app.batch("kb", body))["data"]
    assert {d["change"] for d in again["documents"]} == {"unchanged", "absent"} and again["committed"] is False


@pytest.mark.parametrize(("body", "code", "status"), [
    ({"upserts": [{"id": "a", "content": "x"}], "deletes": ["a"]}, "documents.request_invalid", 400),
    ({}, "documents.request_invalid", 400),
    ({"upserts": "x"}, "documents.request_invalid", 400),
    ({"deletes": [""]}, "documents.request_invalid", 400),
    ({"deletes": ["a"], "other": 1}, "documents.request_invalid", 400),
    ({"upserts": [{"content": "no id"}]}, "documents.document_invalid", 422),
])
async def test_a_malformed_batch_is_refused(docs_app: Start, body: dict[str, object], code: str, status: int) -> None:
    app = await docs_app()
    refused(await app.batch("kb", body), status, code)


async def test_a_batch_larger_than_allowed_is_refused(docs_app: Start) -> None:
    app = await docs_app(documents={"max_batch_documents": 2})
    errors = refused(await app.batch("kb", {"deletes": ["a", "b", "c"]}), 400, "documents.request_invalid")
    assert "max_batch_documents" in errors[0]["message"]


async def test_the_grant_the_index_and_the_datasets_of_the_policy(docs_app: Start) -> None:
    app = await docs_app()
    errors = refused(await app.put("kb", "x", FAQ, token=READER), 403, "access.forbidden_tool")
    assert "documents.write" in errors[0]["message"]
    refused(await app.put("kb", "x", FAQ, token=OTHER), 403, "access.forbidden_scope")
    refused(await app.get("kb", "kb-1", token=OTHER), 403, "access.forbidden_scope")
    refused(await app.batch("kb", {"deletes": ["kb-1"]}, token=OTHER), 403, "access.forbidden_scope")
    refused(await app.put("kb", "x", FAQ, token="not-a-token-0123456789"), 401, "access.unauthorized")
    # NARROW writes dataset 'public' only: a document of another dataset, or none, is denied
    refused(await app.put("kb", "x", FAQ, token=NARROW), 403, "access.dataset_not_allowed")
    data = result(await app.put("kb", "p", {**FAQ, "dataset": "public"}, token=NARROW))["data"]
    assert data["documents"][0]["change"] == "added"
    refused(await app.delete("kb", "kb-1", token=NARROW), 403, "access.dataset_not_allowed")  # dataset 'kb'
    refused(await app.get("kb", "kb-1", token=NARROW), 403, "access.dataset_not_allowed")
    result(await app.get("kb", "kb-1"))
    assert not (app.indexes / "other").exists()
    denied = [a for a in app.audit() if a["outcome"] == "denied"]
    assert {a["code"] for a in denied} == {"access.forbidden_tool", "access.forbidden_scope", "access.unauthorized",
                                           "access.dataset_not_allowed"}


async def test_ids_held_by_another_dataset_or_source_are_conflicts(docs_app: Start) -> None:
    app = await docs_app()
    errors = refused(await app.put("kb", "kb-1", FAQ), 409, "documents.document_conflict")  # kb-1 is of dataset 'kb'
    assert "another dataset" in errors[0]["message"] and "'kb'" not in errors[0]["message"]
    md = b"# \xe5\xae\x89\xe8\xa3\x85\n\nfrom a file\n"
    index = app.app.runtime.indexes.create_or_open_for_write("kb")
    index.ingest([Document("guide.md", "安装", (Section("", "from a file"),), path="guide.md",
                           source="/srv/docs/guide.md")], progress=False)
    index.close()
    errors = refused(await app.put("kb", "guide.md", content=md, content_type="text/markdown"), 409,
                     "documents.document_conflict")
    assert "replace=true" in errors[0]["message"] and "/srv/docs" not in errors[0]["message"]
    data = result(await app.put("kb", "guide.md", content=md, content_type="text/markdown", replace="true"))["data"]
    assert data["documents"][0]["change"] == "updated"
    assert data["warnings"] == [{"id": "guide.md", "message": "replaced a document indexed from another source "
                                                              "(replace=true)"}]


async def test_methods_outside_the_api_are_405_with_allow(docs_app: Start) -> None:
    app = await docs_app()
    from tests.documents.conftest import WRITER
    auth = {"authorization": f"Bearer {WRITER}"}
    r = await app.http.post("/documents/v1/indexes/kb/documents/x", headers=auth)
    refused(r, 405, "documents.method_not_allowed")
    assert r.headers["allow"] == "GET, PUT, DELETE"
    r = await app.http.get("/documents/v1/indexes/kb/batch", headers=auth)
    refused(r, 405, "documents.method_not_allowed")
    assert r.headers["allow"] == "POST"


async def test_a_busy_writer_is_a_retryable_503_and_nothing_is_written(docs_app: Start) -> None:
    from indexes.writer import open_writer

    app = await docs_app(documents={"write_timeout_seconds": 0.3})
    index = app.app.runtime.indexes.create_or_open_for_write("kb")
    held = open_writer(index._index, "kb", str(index.path))  # as kbgate index add holds it
    try:
        r = await app.put("kb", "faq-7", FAQ)
        errors = refused(r, 503, "documents.writer_busy")
        assert errors[0]["retryable"] is True and r.headers["retry-after"] == "1"
    finally:
        held.rollback()
        held.wait_merging_threads()
        index.close()
    refused(await app.get("kb", "faq-7"), 404, "documents.not_found")
    assert result(await app.put("kb", "faq-7", FAQ))["data"]["documents"][0]["change"] == "added"


async def test_a_refusal_never_echoes_the_documents_text(docs_app: Start) -> None:
    app = await docs_app()
    r = await app.put("kb", "x", content=orjson.dumps({"content": "秘密内容 s3cr3t", "publish_time": "s3cr3t"}))
    refused(r, 422, "documents.document_invalid")
    assert "秘密内容" not in r.text


async def test_ids_with_any_characters_a_jsonl_id_may_hold(docs_app: Start) -> None:
    app = await docs_app()
    for doc_id in ("指南/部署 说明.md", "ds1:faq#7", "a%b?c"):
        data = result(await app.put("kb", quote(doc_id, safe="/"), {"content": f"{doc_id} 的正文"}))["data"]
        assert data["documents"][0]["id"] == doc_id
        assert result(await app.get("kb", quote(doc_id, safe="/")))["data"]["id"] == doc_id


async def test_a_body_that_trickles_in_is_408(docs_app: Start) -> None:
    app = await docs_app(documents={"body_timeout_seconds": 0.3})

    async def slow() -> AsyncIterator[bytes]:
        yield b'{"content": '
        await anyio.sleep(1.0)
        yield b'"x"}'

    from tests.documents.conftest import BASE, WRITER
    r = await app.http.put(f"{BASE}/kb/documents/slow", content=slow(),
                           headers={"authorization": f"Bearer {WRITER}", "content-type": "application/json"})
    refused(r, 408, "documents.body_timeout")


async def test_an_index_of_another_schema_version_is_503_not_retryable(docs_app: Start) -> None:
    from indexes.schema import SIDECAR

    app = await docs_app()
    sidecar = app.indexes / "kb" / SIDECAR
    sidecar.write_text(sidecar.read_text("utf-8").replace('"schema_version": 9', '"schema_version": 1'), "utf-8")
    errors = refused(await app.put("kb", "x", FAQ), 503, "documents.index_unavailable")
    assert errors[0]["retryable"] is False and "schema version" in errors[0]["message"]
    assert str(app.indexes) not in errors[0]["message"]


async def test_an_id_that_is_not_utf8_is_refused_not_merged_into_one(docs_app: Start) -> None:
    """The server decodes %C0%AF, %C0%AE and %FF%FE each to U+FFFD: without the raw path's check
    the three PUTs wrote one document "\ufffd" ("added", then "updated" twice)."""
    app = await docs_app()
    before = read_generation(app.indexes / "kb")
    for n, raw in enumerate(("%C0%AF", "%C0%AE", "%FF%FE", "ok%80")):
        errors = refused(await app.put("kb", raw, {"content": f"第{n}篇"}), 400, "documents.request_invalid")
        assert "not UTF-8" in errors[0]["message"]
        refused(await app.get("kb", raw), 400, "documents.request_invalid")
        refused(await app.delete("kb", raw), 400, "documents.request_invalid")
    assert read_generation(app.indexes / "kb") == before
    refused(await app.get("kb", "%EF%BF%BD"), 404, "documents.not_found")  # U+FFFD itself is UTF-8: an id
    data = result(await app.put("kb", "%E2%9C%93?x", {"content": "对勾"}, replace="false"))["data"]
    assert data["documents"][0]["id"] == "\u2713"  # the query string is no part of the id


async def test_an_id_over_the_id_limit_is_refused_on_every_way_in(docs_app: Start) -> None:
    """Tantivy drops a term over 65,530 bytes: an id of 70,000 bytes was 'added' by every batch
    and its delete was 'absent'. Ids are at most 1,024 UTF-8 bytes (indexes.ingest.fields)."""
    app = await docs_app()
    before = read_generation(app.indexes / "kb")
    huge = "L" * 70000
    errors = refused(await app.batch("kb", {"upserts": [{"id": huge, "content": "长的编号"}]}), 422,
                     "documents.document_invalid")
    assert errors[0]["id"] == "upserts[0]" and "over the limit of 1024 bytes" in errors[0]["message"]
    assert huge not in errors[0]["message"]
    errors = refused(await app.batch("kb", {"deletes": [huge]}), 400, "documents.request_invalid")
    assert "deletes[0]" in errors[0]["message"] and "over the limit of 1024 bytes" in errors[0]["message"]
    long_cjk = quote("长" * 342)  # 1,026 bytes
    for r in (await app.put("kb", long_cjk, {"content": "x"}), await app.get("kb", long_cjk),
              await app.delete("kb", long_cjk), await app.put("kb", "L" * 1025, {"content": "x"})):
        errors = refused(r, 400, "documents.request_invalid")
        assert "over the limit of 1024 bytes" in errors[0]["message"]
    assert read_generation(app.indexes / "kb") == before
    edge = "L" * 1024
    assert result(await app.put("kb", edge, {"content": "刚好在上限"}))["data"]["documents"][0]["change"] == "added"
    assert result(await app.delete("kb", edge))["data"]["documents"][0]["change"] == "deleted"


async def test_warnings_are_capped_per_document_and_per_answer(docs_app: Start) -> None:
    """A JSON document of 200,000 fields not kept answered 199,968 warnings in 22 MB: at most 20
    per document (MAX_WARNINGS_PER_DOCUMENT) and 200 per answer (MAX_WARNINGS), each with one
    "and N more"."""
    app = await docs_app()
    fields = {f"f{i}": {"nested": i} for i in range(3000)}  # none kept: one warning each
    warnings = result(await app.put("kb", "many", {"content": "字段很多", **fields}))["data"]["warnings"]
    assert len(warnings) == 21 and all(w["id"] == "many" for w in warnings)
    assert warnings[-1]["message"] == "and 2980 more warnings about this document (at most 20 are listed per document)"
    upserts = [{"id": f"d{n}", "content": f"第{n}篇", **{f"f{i}": {"nested": i} for i in range(30)}} for n in range(12)]
    warnings = result(await app.batch("kb", {"upserts": upserts}))["data"]["warnings"]
    assert len(warnings) == 201 and warnings[-1]["id"] is None
    last = warnings[-1]["message"]
    assert last.startswith("and ") and last.endswith(" more warnings (at most 200 are listed per answer)")
    # every one of the 360 warnings is listed or counted once
    more = [int(w["message"].split()[1]) for w in warnings if w["message"].startswith("and ")]
    assert sum(not w["message"].startswith("and ") for w in warnings) + sum(more) == 12 * 30


async def test_every_answer_under_the_api_is_its_envelope(docs_app: Start) -> None:
    """A line break in the id (a%0Ab) matched no route (Starlette's `path` is `.*`): the
    server's plain-text 404 answered, not the API's JSON."""
    app = await docs_app()
    errors = refused(await app.get("kb", "a%0Ab"), 404, "documents.not_found")
    assert "'a\\nb'" in errors[0]["message"]
    assert result(await app.delete("kb", "a%0Ab"))["data"]["documents"][0]["change"] == "absent"
    refused(await app.put("kb", "a%0Ab", {"content": "x"}), 422, "documents.document_invalid")  # holds U+000A
    from tests.documents.conftest import WRITER
    auth = {"authorization": f"Bearer {WRITER}"}
    for path in ("/documents/v1", "/documents/v1/", "/documents/v1/nope", "/documents/v1/indexes/kb",
                 "/documents/v1/indexes/kb/batch/x", "/documents/v1/indexes/kb/other/a%0Ab", "/documents/v1/%0A"):
        errors = refused(await app.http.get(path, headers=auth), 404, "documents.endpoint_not_found")
    refused(await app.http.get("/documents/v1/nope"), 401, "access.unauthorized")


async def test_a_path_or_id_that_walks_a_tree_is_refused_on_every_way_in(docs_app: Start) -> None:
    """A PUT with path 'a/../config/x' was 'added' and served by search, outside the config/**
    rule; the id '../../x' was accepted. Both are refused (indexes.paths), nothing written."""
    app = await docs_app()
    before = read_generation(app.indexes / "kb")
    secret = {"title": "配置秘密", "content": "这是配置目录里的秘密内容，不应被检索到。"}
    for path in ("a/../config/x", "./config/x", "/config/x", "a\\..\\config\\x", "a/．．/config/x"):
        errors = refused(await app.put("kb", "walker", {**secret, "path": path}), 422, "documents.document_invalid")
        assert "'path'" in errors[0]["message"] and errors[0]["id"] == "walker"
    for doc_id in ("../../x", "a/../config/x", "..\\x", "x/."):
        errors = refused(await app.put("kb", quote(doc_id, safe=""), secret), 422, "documents.document_invalid")
        assert "'id'" in errors[0]["message"]
    errors = refused(await app.put("kb", quote("../config/x.md", safe=""), content=b"# \xe9\x85\x8d\xe7\xbd\xae\n",
                                   content_type="text/markdown"), 422, "documents.document_invalid")
    assert "'id'" in errors[0]["message"]
    errors = refused(await app.put("kb", "x.md", content=b"# x\n", content_type="text/markdown",
                                   path="a/../config/x.md"), 422, "documents.document_invalid")
    errors = refused(await app.batch("kb", {"upserts": [{"id": "ok", "content": "x"},
                                                        {"id": "w", "content": "x", "path": "a/../config/x"}]}),
                     422, "documents.document_invalid")
    assert [e["id"] for e in errors] == ["w"]
    assert read_generation(app.indexes / "kb") == before
    assert "walker" not in await app.search("配置秘密")
    # a plain name with dots and empty segments is no walk
    data = result(await app.put("kb", "v1.2..3", {**secret, "path": "guide//a..b/.hidden"}))["data"]
    assert data["documents"][0]["change"] == "added"


async def test_a_file_refused_for_its_path_names_path_and_says_what_is_wrong(docs_app: Start) -> None:
    """path=a/../config/z.md was refused as "'id' has a '.' or '..' segment"; path=guide/ok.md
    sent to another id was told "… or give path= and dataset=" although path= was given."""
    app = await docs_app()
    md = "# 指南\n\n正文。\n".encode()
    errors = refused(await app.put("kb", "okid", content=md, content_type="text/markdown", path="a/../config/z.md"),
                     422, "documents.document_invalid")
    assert errors[0]["message"].startswith("path= has a '.' or '..' segment"), errors
    assert "'id'" not in errors[0]["message"]
    errors = refused(await app.put("kb", "okid2", content=md, content_type="text/markdown", path="guide/ok.md"),
                     400, "documents.request_invalid")
    message = errors[0]["message"]
    assert "'guide/ok.md'" in message and "not 'okid2'" in message and "send it to 'guide/ok.md'" in message, message


@pytest.mark.parametrize("where", ["batch", "put"])
async def test_json_nested_past_the_limit_is_a_400_naming_it(docs_app: Start, where: str) -> None:
    # 300 levels: orjson read it, then could not write it back (over 255): a 500.
    app = await docs_app()
    deep = b"[" * 300 + b"]" * 300
    doc = b'{"id": "a", "title": "t", "content": "x", "extra": ' + deep + b"}"
    headers = {"authorization": f"Bearer {WRITER}", "content-type": "application/json"}
    if where == "batch":
        r = await app.http.post(f"{BASE}/kb/batch", content=b'{"upserts": [' + doc + b"]}", headers=headers)
    else:
        r = await app.http.put(f"{BASE}/kb/documents/a", content=doc, headers=headers)
    [error] = refused(r, 400, "documents.request_invalid")
    assert "64 levels" in error["message"] and "limit" in error["message"], error
