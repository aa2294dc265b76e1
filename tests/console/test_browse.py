"""The index browser's JSON twins and the console's document changes on a real `kbgate serve`
(Redis): served counts split by rank, a document's chunks, a disabled document absent from a
real Volcengine callback, Dify retrieval, MCP search and fetch, then back after re-enable; a
viewer refused with nothing changed; every change audited as the console user's action."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import orjson
import pytest

from gateway.console.credentials import hash_credential
from gateway.console.links import document_url
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, TOKEN_ALICE, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import TOP, connect, mcp_agent_section, payload

VIEWER = "viewer-credential-0123456789abcdefghij"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(name="live")
def _live(tmp_path: Path, private_index: Path, redis_url: str) -> Iterator[Server]:
    port = free_port()
    agent = mcp_agent_section()
    agent["clients"]["alice"]["tools"] = [*agent["clients"]["alice"]["tools"], "dify.retrieval"]
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=private_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-browse-{port}",
                  admin_token=ADMIN_TOKEN, agent=agent, gaps={"flush_seconds": 0.1},
                  audit={"sink": "file", "path": str(tmp_path / "audit.jsonl")},
                  mcp={"allowed_hosts": ["127.0.0.1:*"]})
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(VIEWER)}}
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        yield srv


def _get(srv: Server, url: str, headers: dict[str, str] | None = None) -> Any:
    r = httpx.get(srv.base + url, headers=headers or ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def _dify_ids(c: httpx.Client, srv: Server) -> list[str]:
    r = c.post(srv.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
               json={"knowledge_id": "support", "query": "密钥轮换", "retrieval_setting": {"top_k": 5,
                                                                                      "score_threshold": 0}})
    assert r.status_code == 200, r.text
    return [rec["metadata"]["document_id"] for rec in r.json()["records"]]


async def _mcp(srv: Server, ref: str = "") -> tuple[list[str], str, bool]:
    """(the document ids MCP search finds for 密钥轮换, by fetching each result; the first
    result's id; whether fetching `ref`, an id found earlier, is refused)."""
    async with connect(srv.base + "/mcp", TOKEN_ALICE) as c:
        results = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"]
        ids = [payload(await c.call_tool("fetch", {"id": r["id"]}))["metadata"]["document_id"] for r in results]
        refused = bool(ref) and (await c.call_tool("fetch", {"id": ref})).is_error
        return ids, (results[0]["id"] if results else ""), refused


def _served(srv: Server, doc: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        rows = {r["doc_id"]: r for r in _get(srv, "/admin/indexes/docs.json?" + urlencode({"path": doc}))["documents"]}
        if rows[doc]["served"] or time.monotonic() > deadline:
            return rows[doc]
        time.sleep(0.1)


def test_json_twins_and_a_disabled_document_served_to_no_caller(live: Server, tmp_path: Path) -> None:
    srv = live
    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        assert "新旧两把密钥" in callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").text
        assert TOP in _dify_ids(c, srv)

        listing = _get(srv, "/admin/indexes.json")["indexes"]
        docs = next(i for i in listing if i["name"] == "docs")
        assert docs["documents"] > 5 and docs["disabled"] >= 1 and docs["url"] == "/admin/indexes/docs"
        row = _served(srv, TOP)
        assert row["served"] == row["top"] + row["lower"] and row["top"] >= 1, row
        page = _get(srv, "/admin/indexes/docs.json?dataset=public&page=1")
        assert page["documents"] and all(d["dataset"] == "public" for d in page["documents"])
        assert page["never"] == sum(1 for d in page["documents"] if d["served"] == 0) or page["pages"] > 1
        doc = _get(srv, document_url("docs", TOP, json=True))
        assert doc["id"] == TOP and doc["qa_visible"] and doc["chunks"][0]["url"].endswith("#chunk-0")
        assert sum(ch["hits"] for ch in doc["chunks"]) >= 1  # the real callbacks' hits, counted by chunk
        revision = doc["revision"]
        found, ref, _ = anyio.run(_mcp, srv)
        assert found[0] == TOP

        # a viewer sees, cannot change: 403, nothing changed
        vera = {"authorization": f"Bearer vera:{VIEWER}"}
        assert _get(srv, "/admin/indexes/docs.json", vera)["total"] == page["total"]
        r = c.post(srv.base + "/admin/indexes/docs/visibility", headers=vera, data={"id": TOP, "visible": "0"})
        assert r.status_code == 403 and "viewer" in r.text
        assert _get(srv, document_url("docs", TOP, json=True))["revision"] == revision

        # disable: every caller stops seeing it, the browser marks it, the count rises
        r = c.post(srv.base + "/admin/indexes/docs/visibility", headers=ADMIN, data={"id": TOP, "visible": "0"})
        assert r.status_code == 303 and r.headers["location"] == "/admin/indexes/docs"
        hidden = _get(srv, document_url("docs", TOP, json=True))
        assert not hidden["qa_visible"] and [{**ch, "hits": 0} for ch in hidden["chunks"]] == [
            {**ch, "hits": 0} for ch in doc["chunks"]]
        assert _get(srv, "/admin/indexes.json")["indexes"][[i["name"] for i in listing].index("docs")]["disabled"] \
            == docs["disabled"] + 1
        assert "新旧两把密钥" not in callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").text
        assert TOP not in _dify_ids(c, srv)

    ids, _, refused = anyio.run(_mcp, srv, ref)
    assert TOP not in ids and refused  # MCP fetch of an id handed out before is refused too

    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        r = c.post(srv.base + "/admin/indexes/docs/visibility", headers=ADMIN, data={"id": TOP, "visible": "1"})
        assert r.status_code == 303
        assert "新旧两把密钥" in callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").text
        assert TOP in _dify_ids(c, srv)
    ids, _, refused = anyio.run(_mcp, srv, ref)
    assert TOP in ids and not refused
    assert _get(srv, document_url("docs", TOP, json=True))["qa_visible"]

    lines = [orjson.loads(x) for x in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    admin = [(x["tool"], x["principal"]["id"], x["status"]) for x in lines if x.get("wing") == "admin"]
    assert ("admin.documents.visibility", "vera", 403) in admin
    assert ("admin.documents.disable", "admin", 200) in admin and ("admin.documents.enable", "admin", 200) in admin


# ------------------------------------------------------------------ in-process: pages and forms


def _app_config(tmp_path: Path, indexes: Path, redis_url: str) -> Any:
    from gateway.core.config import parse_config

    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=indexes, redis_url=redis_url, key_prefix=f"kbgate-browse-{free_port()}",
                  admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(VIEWER)},
                              "olga": {"role": "owner", "indexes": ["other"],
                                       "credential": hash_credential(VIEWER + "o")}}
    return parse_config(data, base_dir=tmp_path, env=ENV)


@pytest.mark.anyio
async def test_pages_render_and_forms_change_only_what_the_role_allows(tmp_path: Path, private_index: Path,
                                                                       redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    for url in ("/admin/indexes", "/admin/indexes/docs", "/admin/indexes/docs?path=guide/&never=1",
                "/admin/indexes/docs?path=guide/*.md&dataset=public&page=9", document_url("docs", TOP, 0)):
        r = await c.get(url, headers=ADMIN)
        assert r.status_code == 200, (url, r.text[-2000:])
    r = await c.get("/admin/indexes/docs", headers=ADMIN)
    assert 'action="docs/upload"' in r.text and "guide/key-rotation.md" in r.text
    assert (await c.get("/admin/indexes/nope", headers=ADMIN)).status_code == 404
    assert (await c.get(document_url("docs", "absent.md"), headers=ADMIN)).status_code == 404
    assert (await c.get("/admin/documents", headers=ADMIN)).headers["location"] == "/admin/indexes"

    # upload: a Markdown and a text file and one of a type kbgate does not read, each reported
    files = [("file", ("leave.md", "# 年假\n\n## 申请\n\n提前三天申请年假。\n".encode(), "text/markdown")),
             ("file", ("notes.txt", "出差报销要在一个月内提交。".encode(), "text/plain")),
             ("file", ("tool.exe", b"MZ\x00", "application/octet-stream"))]
    for who, status in ((f"vera:{VIEWER}", 403), (f"olga:{VIEWER}o", 403)):
        r = await c.post("/admin/indexes/docs/upload", headers={"authorization": f"Bearer {who}"},
                         files=files, data={"folder": "hr"})
        assert r.status_code == status, r.text
    assert "hr/leave.md" not in (await c.get("/admin/indexes/docs.json", headers=ADMIN)).text
    r = await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=files, data={"folder": "hr"})
    assert r.status_code == 303
    report = orjson.loads(__import__("base64").urlsafe_b64decode(r.cookies["kbgate_report"]))
    changes = {i["name"]: i["change"] for i in report["items"]}
    assert changes == {"leave.md": "added", "notes.txt": "added", "tool.exe": "refused"}, report
    c.cookies.set("kbgate_report", r.cookies["kbgate_report"], path="/admin/indexes")
    page = await c.get("/admin/indexes/docs", headers=ADMIN)
    assert "Result of upload" in page.text and "not a type kbgate reads" in page.text

    # edit in place, then delete
    form = await c.get("/admin/indexes/docs/edit?id=hr/leave.md", headers=ADMIN)
    assert form.status_code == 200 and "提前三天申请年假" in form.text
    r = await c.post("/admin/indexes/docs/edit", headers=ADMIN,
                     data={"id": "hr/leave.md", "text": "# 年假\n\n## 申请\n\n提前五天申请年假。\n"})
    assert r.status_code == 303 and r.headers["location"] == document_url("docs", "hr/leave.md")
    doc = (await c.get(document_url("docs", "hr/leave.md", json=True), headers=ADMIN)).json()
    assert "提前五天" in doc["chunks"][0]["text"] and doc["chunks"][0]["heading"] == "申请"
    r = await c.post("/admin/indexes/docs/delete", headers=ADMIN, data={"id": "hr/notes.txt", "confirm": "1"})
    assert r.status_code == 303
    assert (await c.get(document_url("docs", "hr/notes.txt", json=True), headers=ADMIN)).status_code == 404
