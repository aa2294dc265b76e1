"""An index served by Milvus end to end (a real Milvus Lite server, a real `kbgate serve`): every
caller answers as from a Tantivy index of the same pages; with Milvus stopped, a retryable 503
Ret 50302 within the budget; with it back, answers without a restart."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from tests.support import harness
from tests.support.callbacks import answered, post, result_ids
from tests.support.configs import ACME_KEYS, ENV, EVERYTHING, SECRET_ACME, TOKEN_ALICE, client, config, tenant, write
from tests.support.documents import HYBRID_DOCS, as_jsonl
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.milvus_server import MilvusLite
from tests.support.paths import ROOT
from tests.support.polling import eventually

QUESTIONS = ("备份到 S3", "集群添加存储节点", "慢日志 阈值", "重置管理员口令", "今天天气怎么样")
AUTH = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}


def write_site(tmp: Path, uri: str, port: int, *, timeout: float = 2.0) -> Path:
    """tmp/docs/pages.jsonl (HYBRID_DOCS) and tmp/gateway.toml: tenant acme's route tech/docs over
    index 'docs' in Milvus at `uri` (a collection of its own), route tech/tantivy over index
    'tantivy' (the same pages in a Tantivy folder), agent routes over 'docs'; alice may write
    'docs' through the document API."""
    (tmp / "docs").mkdir()
    (tmp / "docs" / "pages.jsonl").write_text(as_jsonl(HYBRID_DOCS), "utf-8")
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", "docs", "docs"), ("tech", "tantivy", "tantivy")])
    tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search", "documents.write"]
    alice = client("t1", TOKEN_ALICE, ["support"], tools, write_indexes=["docs"], **EVERYTHING)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}}, "clients": {"alice": alice}}
    data = config(tmp, tenants=[acme], port=port, agent=agent, lexical=["tantivy"],
                  access={"sqlite_path": "feedback.sqlite3"})
    data["indexes"]["docs"] = {"backend": "milvus", "uri": uri, "collection": f"kb_{uuid.uuid4().hex[:12]}",
                               "consistency": "Strong", "timeout_seconds": timeout, "dense": "none"}
    return write(tmp / "gateway.toml", data)


def index_add(cfg: Path, tmp: Path, index: str) -> None:
    done = harness.kbgate("index", "add", "--config", str(cfg), "--index", index, "--no-progress",
                          str(tmp / "docs"), env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"index {index}: 5 added" in done.stdout, done.stdout


def callback(c: httpx.Client, base: str, query: str, second: str = "docs") -> httpx.Response:
    return post(c, base, SECRET_ACME, second=second, query=query, limit=3)


def answer(c: httpx.Client, base: str, query: str, second: str = "docs") -> dict[str, Any]:
    return answered(c, base, SECRET_ACME, second=second, query=query, limit=3)


ids = result_ids


def server(cfg: Path, port: int) -> Server:
    return serve(cfg, port=port, env=ENV, cwd=ROOT)


async def _mcp_first(base: str, query: str) -> str:
    async with connect(base + "/mcp", TOKEN_ALICE) as c:
        found = payload(await c.call_tool("search", {"query": query}))["results"]
    return str(found[0]["title"])


def test_a_milvus_index_answers_every_caller_as_a_tantivy_index_does(milvus: MilvusLite, tmp_path: Path) -> None:
    port = free_port()
    cfg = write_site(tmp_path, milvus.uri, port)
    index_add(cfg, tmp_path, "docs")
    index_add(cfg, tmp_path, "tantivy")
    assert not (tmp_path / "indexes" / "docs" / "meta.json").exists()  # no Tantivy folder: Milvus holds it
    with server(cfg, port) as srv, httpx.Client(timeout=30) as c:
        for q in QUESTIONS:  # the same Ret/Msg/Result, byte for byte, as the Tantivy route's
            assert answer(c, srv.base, q) == answer(c, srv.base, q, "tantivy"), q
        got = answer(c, srv.base, "备份到 S3")
        assert got["Ret"] == 0 and ids(got)[:1] == ["br"] and "BR 工具" in got["Result"][0]["Summary"]
        assert "secret" not in ids(answer(c, srv.base, "内部口令表"))  # hidden: never served
        assert answer(c, srv.base, "今天天气怎么样")["Result"] == []  # off-topic: under the floor
        r = c.post(f"{srv.base}/agent-api/v1/workspaces/support/knowledge/search", headers=AUTH,
                   content=orjson.dumps({"query": "备份到 S3"}))
        assert r.status_code == 200 and r.json()["hints"][0]["title"] == "备份", r.text
        r = c.post(f"{srv.base}/agent-access/v1/tools/search", headers=AUTH,
                   content=orjson.dumps({"caller": {"type": "agent"}, "input": {"query": "集群添加存储节点"}}))
        assert r.status_code == 200 and r.json()["data"]["results"][0]["citation"]["docId"] == "scale", r.text
        r = c.post(f"{srv.base}/dify/retrieval", headers=AUTH, content=orjson.dumps(
            {"knowledge_id": "support", "query": "慢日志 阈值",
             "retrieval_setting": {"top_k": 3, "score_threshold": 0}}))
        assert r.status_code == 200 and r.json()["records"][0]["metadata"]["document_id"] == "slow", r.text
        assert anyio.run(_mcp_first, srv.base, "重置管理员口令") == "账号管理"
        # the document API writes the collection; Strong consistency: the next callback sees it
        page = {"title": "远程办公", "content": "在家连接公司内网：先启动客户端，再输入动态口令。"}
        r = c.put(f"{srv.base}/documents/v1/indexes/docs/documents/vpn", content=orjson.dumps(page), headers=AUTH)
        assert r.status_code == 200, r.text
        assert ids(answer(c, srv.base, "在家连接公司内网"))[:1] == ["vpn"]
        r = c.delete(f"{srv.base}/documents/v1/indexes/docs/documents/vpn", headers=AUTH)
        assert r.status_code == 200 and r.json()["data"]["documents"][0]["change"] == "deleted", r.text
        assert "vpn" not in ids(answer(c, srv.base, "在家连接公司内网"))
        ready = c.get(f"{srv.base}/readyz").json()
        route = next(x for x in ready["routes"] if x["index"] == "docs")
        assert route["state"] == "ok" and route["commit"].endswith("-milvus"), ready


def test_milvus_down_answers_retryable_unavailable_and_recovers_without_a_restart(tmp_path: Path) -> None:
    port = free_port()
    with MilvusLite(tmp_path / "milvus") as m:
        cfg = write_site(tmp_path, m.uri, port, timeout=1.0)
        index_add(cfg, tmp_path, "docs")
        index_add(cfg, tmp_path, "tantivy")
        with server(cfg, port) as srv, httpx.Client(timeout=30) as c:
            assert ids(answer(c, srv.base, "备份到 S3"))[:1] == ["br"]
            m.stop()
            for q in ("备份到 S3", "集群添加存储节点"):  # not cached: a question not asked before too
                r = callback(c, srv.base, q + " 步骤")
                assert r.status_code == 503, r.text
                body = orjson.loads(r.content)
                assert body == {"Ret": 50302, "Msg": "index 'docs' is not available", "Result": []}, body
            assert answer(c, srv.base, "备份到 S3", "tantivy")["Ret"] == 0  # the other route is unharmed
            ready = c.get(f"{srv.base}/readyz")
            route = next(x for x in ready.json()["routes"] if x["index"] == "docs")
            assert route["state"] == "unavailable" and route["problem"] == "unreachable", ready.json()
            m.start()  # the same port and data: kbgate reconnects on its own
            assert eventually(lambda: callback(c, srv.base, "备份到 S3 步骤").status_code, 200) == 200
            assert ids(answer(c, srv.base, "备份到 S3"))[:1] == ["br"]
            route = next(x for x in c.get(f"{srv.base}/readyz").json()["routes"] if x["index"] == "docs")
            assert route["state"] == "ok", route


def test_index_copy_moves_a_tantivy_index_into_milvus(milvus: MilvusLite, tmp_path: Path) -> None:
    from indexes.store import IndexStore
    from indexes.types import MilvusConfig

    cfg = write_site(tmp_path, milvus.uri, free_port())
    text = cfg.read_text("utf-8")
    tantivy_only = text.replace("[indexes.docs]", "[indexes.unused]")
    cfg.write_text(tantivy_only, "utf-8")
    index_add(cfg, tmp_path, "docs")  # a Tantivy folder, as before the move
    cfg.write_text(text, "utf-8")  # now configured Milvus
    done = harness.kbgate("index", "copy", "--config", str(cfg), "--index", "docs", "--to", "milvus", env=ENV)
    assert done.returncode == 0, done.stderr
    assert "index docs: 5 documents in the folder, 5 written to milvus, 5 there now" in done.stdout
    again = harness.kbgate("index", "copy", "--config", str(cfg), "--index", "docs", "--to", "milvus", env=ENV)
    assert again.returncode == 0 and "0 written to milvus, 5 there now" in again.stdout, again.stdout
    collection = next(line.split('"')[1] for line in text.splitlines() if line.startswith("collection"))
    moved = IndexStore(tmp_path / "indexes", remote={"docs": MilvusConfig(milvus.uri, collection)}).open("docs")
    folder = IndexStore(tmp_path / "indexes").open("docs")
    assert moved.revisions() == folder.revisions()
    assert moved.get_document("secret") is None and moved.get_document("secret", include_hidden=True) == \
        folder.get_document("secret", include_hidden=True)
    # the console's try (here `kbgate try`, the same code path) explains a search on the Milvus route
    tried = harness.kbgate("try", "--config", str(cfg), "--caller", "volcengine", "--tenant", "acme", "--first", "tech",
                           "--second", "docs", "--query", "备份到 S3", "--json", env=ENV)
    assert tried.returncode == 0, tried.stderr
    out = orjson.loads(tried.stdout)
    assert out["status"] == 200 and ids(orjson.loads(out["body"]))[:1] == ["br"], out
