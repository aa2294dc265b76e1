"""The document list as an owner expects it, through the app in-process (real Redis, a real index):
added and updated time, size, what wrote it, status with the writer's refusal, hits (also by
chunk); editing on the text as uploaded, so its sub-headings survive; re-indexing one document
or all of them (confirmed first), each reported."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.doc_writes import REPORT_COOKIE
from gateway.console.gaps.record import _aggregate
from gateway.console.gaps.store import CHUNK, day_of
from gateway.console.links import document_url
from gateway.core.events import Asker, SearchAnswered, Served
from indexes import ledger
from tests.console.test_browse import ADMIN, _app_config
from tests.support.console import login

pytestmark = pytest.mark.anyio
MD = "---\ntitle: 请假制度\n---\n\n# 请假制度\n\n## 年假\n\n每年十天年假。\n\n### 申请\n\n提前三天申请。\n"


async def _rows(c: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    r = await c.get("/admin/indexes/docs.json", headers=ADMIN)
    assert r.status_code == 200, r.text
    return {d["doc_id"]: d for d in r.json()["documents"]}


def _report(r: httpx.Response) -> dict[str, Any]:
    raw = r.cookies.get(REPORT_COOKIE) or ""
    got: dict[str, Any] = orjson.loads(base64.urlsafe_b64decode(raw.encode()))
    return got


async def _upload(c: httpx.AsyncClient, name: str, body: bytes, **data: str) -> httpx.Response:
    r = await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=[("file", (name, body, "text/markdown"))],
                     data={"folder": "hr", **data})
    assert r.status_code == 303, r.text
    return r


async def test_the_list_shows_when_size_source_status_and_hits(tmp_path: Path, private_index: Path, redis_url: str,
                                                              start_app: Any) -> None:
    c, app, clock = await start_app(_app_config(tmp_path, private_index, redis_url))
    before = time.time()
    await _upload(c, "leave.md", MD.encode())
    row = (await _rows(c))["hr/leave.md"]
    assert (row["via"], row["size"], row["status"], row["kept_source"]) == ("console", len(MD.encode()), "served", True)
    assert before - 1 <= row["added_at"] == row["updated_at"] <= time.time() + 1
    old = (await _rows(c))["guide/key-rotation.md"]  # written before the ledger: nothing known, said so
    assert (old["via"], old["added_at"], old["size"], old["status"]) == ("", None, None, "served")
    page = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    assert '<td data-label="Source" class="via">console</td>' in page
    assert '<td data-label="Size" class="num size">' in page and "—" in page

    # disabling is a write: updated moves, added and what wrote it stay, the source text too
    time.sleep(0.01)
    r = await c.post("/admin/indexes/docs/visibility", headers=ADMIN, data={"id": "hr/leave.md", "visible": "0"})
    assert r.status_code == 303
    row2 = (await _rows(c))["hr/leave.md"]
    assert (row2["status"], row2["via"], row2["added_at"], row2["kept_source"]) == ("disabled", "console",
                                                                                    row["added_at"], True)
    assert row2["updated_at"] > row["updated_at"]

    # a document written before the ledger, disabled: updated now, added and what wrote it still unknown
    r = await c.post("/admin/indexes/docs/visibility", headers=ADMIN, data={"id": "ops/deploy.md", "visible": "0"})
    assert r.status_code == 303
    deploy = (await _rows(c))["ops/deploy.md"]
    assert (deploy["added_at"], deploy["via"], deploy["status"]) == (None, "", "disabled") and deploy["updated_at"]

    # the writer refuses an id another dataset holds: the list says so, with why; the old one still served
    r = await c.post("/admin/indexes/docs/upload", headers=ADMIN,
                     files=[("file", ("key-rotation.md", "# 新\n\n新的。".encode(), "text/markdown"))],
                     data={"folder": "guide"})
    assert _report(r)["items"][0]["change"] == "refused"
    refused = (await _rows(c))["guide/key-rotation.md"]
    assert refused["status"] == "refused" and refused["refusal"]["kind"] == "dataset"
    assert "public" in refused["refusal"]["reason"] and refused["refusal"]["via"] == "console"
    page = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    assert 'class="state status-refused"' in page and "last change refused" in page

    # hits: the gap store's served counts, the list's and each chunk's
    gaps = app.gaps.store
    day = day_of(clock.now())
    await gaps.apply([], [], {("docs", day): Counter({"hr/leave.md": 3}), ("docs", day, "top"): Counter(
        {"hr/leave.md": 2}), ("docs", day, CHUNK): Counter({"hr/leave.md#0": 3})}, app.runtime.config.gaps,
                     clock.now())
    row3 = (await _rows(c))["hr/leave.md"]
    assert (row3["served"], row3["top"], row3["lower"]) == (3, 2, 1)
    doc = (await c.get(document_url("docs", "hr/leave.md", json=True), headers=ADMIN)).json()
    assert [ch["hits"] for ch in doc["chunks"]][0] == 3 and doc["facts"]["via"] == "console"
    html = (await c.get(document_url("docs", "hr/leave.md"), headers=ADMIN)).text
    assert '<span class="hits">3 hits</span>' in html


def test_every_hit_served_is_counted_by_its_chunk() -> None:
    hit = Served("docs", "guide/a.md", "A", "guide/a.md", 0.9, 3.0, "r", chunk=2)
    event = SearchAnswered(Asker("agent", "alice", ("support",)), "问题", ("docs",), (hit,))
    _, _, served = _aggregate([(event, 86400.0 * 3, False, "answered", 0.3)], b"k" * 32, lambda e: ["问题"])
    assert served[("docs", day_of(86400.0 * 3), CHUNK)] == Counter({"guide/a.md#2": 1})


async def test_editing_opens_the_text_as_uploaded_and_keeps_its_headings(tmp_path: Path, private_index: Path,
                                                                        redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    await _upload(c, "leave.md", MD.encode())
    form = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)).text
    assert "### 申请" in form and 'id="edit-source"' in form and 'id="edit-rebuilt"' not in form
    changed = MD.replace("十天", "十五天")
    r = await c.post("/admin/indexes/docs/edit", headers=ADMIN, data={"id": "hr/leave.md", "text": changed})
    assert r.status_code == 303 and _report(r)["items"][0]["change"] == "updated"
    form = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)).text
    assert "### 申请" in form and "十五天" in form and "## 年假" in form
    doc = (await c.get(document_url("docs", "hr/leave.md", json=True), headers=ADMIN)).json()
    assert any("十五天" in ch["text"] for ch in doc["chunks"]) and doc["facts"]["size"] == len(changed.encode())
    # a document written before the text was kept opens rebuilt from its chunks, and the page says so
    old = (await c.get("/admin/indexes/docs/edit?id=guide/key-rotation.md", headers=ADMIN)).text
    assert 'id="edit-rebuilt"' in old and "rebuilt from its chunks" in old


def _base(form: str) -> str:
    return form.split('name="base" value="', 1)[1].split('"', 1)[0]


async def test_a_save_on_a_stale_edit_form_is_refused_and_keeps_the_typed_text(
        tmp_path: Path, private_index: Path, redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    await _upload(c, "leave.md", MD.encode())
    tab_a = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)).text
    tab_b = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)).text
    assert _base(tab_a) == _base(tab_b) and len(_base(tab_a)) == 64
    r = await c.post("/admin/indexes/docs/edit", headers=ADMIN,
                     data={"id": "hr/leave.md", "text": MD.replace("十天", "十五天"), "base": _base(tab_a)})
    assert r.status_code == 303 and _report(r)["items"][0]["change"] == "updated"
    stale = MD.replace("提前三天", "提前一周<b>")
    r = await c.post("/admin/indexes/docs/edit", headers=ADMIN,
                     data={"id": "hr/leave.md", "text": stale, "base": _base(tab_b)})
    assert r.status_code == 409 and 'id="edit-stale"' in r.text and "changed since this page was opened" in r.text
    assert "提前一周&lt;b&gt;" in r.text and 'name="text"' not in r.text  # the typed text shown, not a save form
    assert 'href="/admin/indexes/docs/edit?id=hr%2Fleave.md"' in r.text
    again = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)).text
    assert "十五天" in again and "提前三天" in again and _base(again) != _base(tab_b)  # A's save is kept
    r = await c.post("/admin/indexes/docs/edit", headers={**ADMIN, "Accept-Language": "zh-CN"},
                     data={"id": "hr/leave.md", "text": stale, "base": _base(tab_b)})
    assert r.status_code == 409 and "该文档已被修改" in r.text and "提前一周&lt;b&gt;" in r.text
    assert (await login(c)).status_code == 303  # a browser's form always carries its base: one without is stale
    form = (await c.get("/admin/indexes/docs/edit?id=hr/leave.md")).text.split('action="edit"')[1]
    csrf = form.split('name="csrf" value="')[1].split('"')[0]
    r = await c.post("/admin/indexes/docs/edit", data={"id": "hr/leave.md", "text": stale, "csrf": csrf})
    assert r.status_code == 409 and 'id="edit-stale"' in r.text


async def test_reindex_one_document_or_all_of_them_confirmed(tmp_path: Path, private_index: Path, redis_url: str,
                                                           start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    await _upload(c, "leave.md", MD.encode())
    before = await _rows(c)
    r = await c.post("/admin/indexes/docs/reindex", headers=ADMIN, data={"id": "hr/leave.md"})
    assert r.status_code == 303 and r.headers["location"] == document_url("docs", "hr/leave.md")
    report = _report(r)
    [item] = report["items"]
    assert (item["change"], item["chunks"]) == ("reindexed", [before["hr/leave.md"]["chunks"]] * 2)
    assert report["reindexed"]["documents"] == 1 and report["reindexed"]["refused"] == 0
    after = (await _rows(c))["hr/leave.md"]
    assert (after["via"], after["added_at"], after["kept_source"]) == ("console", before["hr/leave.md"]["added_at"],
                                                                      True)
    assert after["updated_at"] >= before["hr/leave.md"]["updated_at"] and after["revision"] == \
        before["hr/leave.md"]["revision"]
    page = (await c.get(document_url("docs", "hr/leave.md"), headers=ADMIN)).text  # the report, carried over
    assert "1 document(s) re-indexed" in page and 'class="chunks"' in page

    ask = await c.post("/admin/indexes/docs/reindex", headers=ADMIN, data={"all": "1"})
    assert ask.status_code == 200 and 'id="confirm-form"' in ask.text and "Re-index all" in ask.text
    assert (await _rows(c))["hr/leave.md"]["updated_at"] == after["updated_at"]  # nothing written yet
    r = await c.post("/admin/indexes/docs/reindex", headers=ADMIN, data={"all": "1", "confirm": "1"})
    assert r.status_code == 303 and r.headers["location"].endswith("/admin/indexes/docs")
    summary = _report(r)["reindexed"]
    assert summary["documents"] == len(before) and summary["refused"] == 0
    assert summary["chunks_before"] == summary["chunks_after"] == sum(d["chunks"] for d in before.values())
    hidden = (await _rows(c))["guide/hidden.md"]
    assert hidden["qa_visible"] is False  # a re-index keeps a disabled document disabled
    missing = await c.post("/admin/indexes/docs/reindex", headers=ADMIN, data={"id": "nope.md"})
    assert missing.status_code == 404


async def test_the_document_api_records_its_writes_and_keeps_a_files_text(private_index: Path,
                                                                         start_app: Any) -> None:
    from tests.documents.conftest import BASE, WRITER, documents_config
    from tests.support.configs import parse

    c, _, _ = await start_app(parse(documents_config(private_index.parent, private_index), private_index.parent))
    r = await c.put(f"{BASE}/kb/documents/hr%2Fleave.md", content=MD.encode(),
                    headers={"authorization": f"Bearer {WRITER}", "content-type": "text/markdown"})
    assert r.status_code == 200, r.text
    docs, refused = ledger.entries(private_index / "kb")
    assert (docs["hr/leave.md"].via, docs["hr/leave.md"].size, refused) == ("api", len(MD.encode()), {})
    assert ledger.original(private_index / "kb", "hr/leave.md") == MD
    r = await c.put(f"{BASE}/kb/documents/j1", json={"title": "标题", "content": "正文。"},
                    headers={"authorization": f"Bearer {WRITER}"})
    assert r.status_code == 200, r.text
    assert ledger.original(private_index / "kb", "j1") is None and ledger.entries(private_index / "kb")[0]["j1"].via \
        == "api"
    r = await c.delete(f"{BASE}/kb/documents/j1", headers={"authorization": f"Bearer {WRITER}"})
    assert r.status_code == 200 and "j1" not in ledger.entries(private_index / "kb")[0]


def test_kbgate_index_add_records_its_documents_as_cli(tmp_path: Path) -> None:
    from gateway.ops.index_commands import cmd_index_add
    from tests.support.configs import write

    cfg = write(tmp_path / "gateway.toml", {"indexes": {"dir": "indexes", "hr": {"dense": "none"}}})
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "leave.md").write_text(MD, "utf-8")
    args = argparse.Namespace(config=str(cfg), index="hr", paths=[str(tmp_path / "pages")], dataset=None, root=None,
                              url_base=None, max_document_bytes=None, delete_missing=False, force=False,
                              no_progress=True, replace=False, wait=0.0, allow_empty=False)
    assert cmd_index_add(args) == 0
    [(doc_id, entry)] = ledger.entries(tmp_path / "indexes" / "hr")[0].items()
    assert (doc_id, entry.via, entry.has_original) == ("leave.md", "cli", False) and entry.size


async def test_a_large_upload_lists_every_file_with_its_outcome(tmp_path: Path, private_index: Path, redis_url: str,
                                                               start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    files = [("file", (f"p{n:02}.md", f"# 第{n}页\n\n内容{n}。".encode(), "text/markdown")) for n in range(12)]
    files.append(("file", ("tool.exe", b"MZ", "application/octet-stream")))
    r = await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=files, data={"folder": "batch"})
    assert r.status_code == 303
    report = _report(r)
    assert report["counts"] == {"added": 12, "refused": 1} and report["files"] == 13 and report["note"]
    page = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    shown = page[page.index('class="report"'):page.index("</section>", page.index('class="report"'))]
    assert shown.count("<li class=") == 13 and "not listed" not in shown
    assert shown.index("tool.exe") < shown.index("p00.md")  # refused first
    assert "13 files" in shown and '<span class="count-added">added 12</span>' in shown
    assert 'id="upload-limits"' in page and "Up to 100 files" in page
    assert {f"batch/p{n:02}.md" for n in range(12)} <= set(await _rows(c))


async def test_a_documents_page_lists_the_gap_questions_that_came_near_text_to_its_owners(
        tmp_path: Path, private_index: Path, redis_url: str, start_app: Any) -> None:
    from gateway.console.gaps.groups import Question
    from tests.console.test_browse import VIEWER

    cfg = _app_config(tmp_path, private_index, redis_url)
    cfg = dataclasses.replace(cfg, admin=dataclasses.replace(cfg.admin, show_queries=True))
    c, app, clock = await start_app(cfg)
    doc = "guide/key-rotation.md"
    q = Question("a" * 32, ("t1",), count=2, no_answer=2, first=clock.now(), last=clock.now(),
                 best=[{"index": "docs", "doc_id": doc, "title": "密钥轮换", "path": doc, "relevance": 0.2961,
                        "revision": ""}])
    await app.gaps.store.apply([q], [("a" * 32, clock.now(), "密钥怎么换")], {}, app.runtime.config.gaps, clock.now())
    page = (await c.get(document_url("docs", doc), headers=ADMIN)).text
    assert 'id="near-h"' in page and "asked 2 times" in page and "0.2961" in page
    assert "<q>密钥怎么换</q>" in page  # an admin reads the text kept
    viewer = (await c.get(document_url("docs", doc), headers={"authorization": f"Bearer vera:{VIEWER}"})).text
    assert "asked 2 times" in viewer and "密钥怎么换" not in viewer  # a viewer sees counts only
    olga = (await c.get(document_url("docs", doc), headers={"authorization": f"Bearer olga:{VIEWER}o"})).text
    assert "asked 2 times" in olga and "密钥怎么换" not in olga  # so does the owner of another index
    other = (await c.get(document_url("docs", "ops/deploy.md"), headers=ADMIN)).text
    assert 'id="near-h"' not in other


async def test_refused_writes_of_ids_the_index_does_not_hold_are_listed(tmp_path: Path, private_index: Path,
                                                                       redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    ledger.note_refused(private_index / "docs", [("ghost.md", "source", "indexed from /srv/a.md, not /srv/b.md")],
                        via="sync", now=time.time())
    body = (await c.get("/admin/indexes/docs.json", headers=ADMIN)).json()
    assert [(r["doc_id"], r["via"], r["kind"]) for r in body["refused"]] == [("ghost.md", "sync", "source")]
    page = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    assert 'id="refused-h"' in page and 'data-refused="ghost.md"' in page and "/srv/a.md" in page


async def test_a_reindex_after_the_chunk_size_changed_reports_each_documents_new_chunks(
        tmp_path: Path, private_index: Path, redis_url: str, start_app: Any) -> None:
    import json

    from indexes.schema import SIDECAR

    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    long = "---\ntitle: 手册\n---\n\n" + "\n\n".join(f"## 第{n}节\n\n" + "这一节讲运维的细节。" * 30 for n in range(6))
    await _upload(c, "manual.md", long.encode())
    before = (await _rows(c))["hr/manual.md"]["chunks"]
    sidecar = private_index / "docs" / SIDECAR  # the index's chunk size: as if set anew
    meta = json.loads(sidecar.read_text("utf-8"))
    sidecar.write_text(json.dumps({**meta, "chunk_chars": max(120, meta.get("chunk_chars", 800) // 4)}), "utf-8")
    r = await c.post("/admin/indexes/docs/reindex", headers=ADMIN, data={"all": "1", "confirm": "1"})
    report = _report(r)
    after = (await _rows(c))["hr/manual.md"]["chunks"]
    assert after > before, (before, after)
    assert {"name": "hr/manual.md", "change": "reindexed", "chunks": [before, after]}.items() <= \
        next(i for i in report["items"] if i["id"] == "hr/manual.md").items()
    assert report["reindexed"]["changed"] >= 1 and report["reindexed"]["chunks_after"] > \
        report["reindexed"]["chunks_before"]
    assert all(i["chunks"][0] != i["chunks"][1] for i in report["items"])  # all: only what changed is listed
