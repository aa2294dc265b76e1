"""Per-route retrieval dials end to end: one real `kbgate serve` over one lexical index with a
rerank stage (the real rerank server in "reverse" mode), every caller answering each route as its
dials say. A hybrid index's dense share: tests/e2e/test_dials_hybrid.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from indexes.types import Document, Section
from tests.support.callbacks import post
from tests.support.configs import (
    ACME_KEYS,
    ENV,
    EVERYTHING,
    SECRET_ACME,
    TOKEN_ALICE,
    TOKEN_BOB,
    client,
    config,
    tenant,
    write,
)
from tests.support.documents import as_jsonl
from tests.support.harness import free_port
from tests.support.mcp_env import connect, payload
from tests.support.rerank_server import PATHS, reversed_site

# Five documents that all match 备份, each more often than the next: BM25 ranks d0 first.
DOCS = [Document(f"d{i}", f"第{i}篇", (Section("", "备份 " * (6 - i) + "其他内容" * (i + 1)),), dataset="public")
        for i in range(5)]
LEXICAL = ["d0", "d1", "d2", "d3", "d4"]
# One document of seven sections, about five chunks; only the middle section holds 演练.
FILLER = "这里是本步骤的普通说明文字，照着做就可以。"
STEPS = Document("runbook", "操作手册", tuple(
    Section("", f"步骤{i}开始。" + ("每季度做一次恢复演练。" if i == 3 else "") + FILLER * 16)
    for i in range(7)), dataset="public")
ROUTES = {  # second_level_id → the route's dials
    "plain": {},
    "norerank": {"rerank": False},
    "cand2": {"candidates": 2},
    "thr": {"rerank_threshold": 0.5, "relevance_floor": 0.0},
    "near": {"neighbours": 1},
    "floor": {"relevance_floor": 0.5},
    "apart": {"relevance_floor": 0.5, "rerank_threshold": 0.1},
}


def write_site(tmp: Path, port: int, rr_port: int) -> Path:
    (tmp / "docs").mkdir()
    (tmp / "docs" / "pages.jsonl").write_text(as_jsonl([*DOCS, STEPS]), "utf-8")
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", name, "docs") for name in ROUTES])
    for route in acme["acme"]["routes"]:
        route.update(ROUTES[route["second_level_id"]])
    tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search"]
    clients = {"alice": client("t1", TOKEN_ALICE, ["support"], tools, **EVERYTHING),
               "bob": client("t2", TOKEN_BOB, ["support_lex"], tools, **EVERYTHING)}
    agent = {"ref_key_env": "KBGATE_REF_KEY", "clients": clients,
             "routes": {"support": {"index": "docs"},
                        "support_lex": {"index": "docs", "rerank": False, "neighbours": 1}}}
    data = config(tmp, tenants=[acme], port=port, agent=agent, access={"sqlite_path": "feedback.sqlite3"},
                  search={"content_chars": 3000}, dify={"content_chars": 3000}, lexical=["docs"])
    data["indexes"]["docs"]["rerank"] = {"provider": "cohere", "url": f"http://127.0.0.1:{rr_port}{PATHS['cohere']}",
                                         "model": "stand-in", "timeout_ms": 5000}
    return write(tmp / "gateway.toml", data)


def callback(c: httpx.Client, base: str, second: str, query: str, limit: int = 5) -> list[dict[str, Any]]:
    r = post(c, base, SECRET_ACME, second=second, query=query, limit=limit)
    assert r.status_code == 200, r.text
    answer = orjson.loads(r.content)
    assert answer["Ret"] == 0, answer
    return list(answer["Result"])


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["Id"] for item in items]


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": "application/json"}


def dify(c: httpx.Client, base: str, token: str, knowledge: str, query: str) -> list[dict[str, Any]]:
    r = c.post(f"{base}/dify/retrieval", headers=auth(token), content=orjson.dumps(
        {"knowledge_id": knowledge, "query": query, "retrieval_setting": {"top_k": 5, "score_threshold": 0}}))
    assert r.status_code == 200, r.text
    return list(r.json()["records"])


def tool_ids(c: httpx.Client, base: str, token: str, query: str) -> list[str]:
    r = c.post(f"{base}/agent-access/v1/tools/search", headers=auth(token), content=orjson.dumps(
        {"caller": {"type": "agent"}, "input": {"query": query, "limit": 5}}))
    assert r.status_code == 200, r.text
    return [res["citation"]["docId"] for res in r.json()["data"]["results"]]


def knowledge_titles(c: httpx.Client, base: str, token: str, workspace: str, query: str) -> list[str]:
    r = c.post(f"{base}/agent-api/v1/workspaces/{workspace}/knowledge/search", headers=auth(token),
               content=orjson.dumps({"query": query, "limit": 3}))
    assert r.status_code == 200, r.text
    return [h["title"] for h in r.json()["hints"]]


async def _mcp_titles(base: str, token: str, query: str) -> list[str]:
    async with connect(base + "/mcp", token) as c:
        found = payload(await c.call_tool("search", {"query": query}))["results"]
    return [str(f["title"]) for f in found]


def titles(doc_ids: list[str]) -> list[str]:
    return [f"第{i[1:]}篇" for i in doc_ids]


def test_routes_on_one_index_answer_as_their_dials_say_through_every_caller(tmp_path: Path) -> None:
    port, rr_port = free_port(), free_port()
    cfg = write_site(tmp_path, port, rr_port)
    with reversed_site(cfg, port, rr_port, ENV) as (rr, srv), httpx.Client(timeout=30) as c:
        base = srv.base
        # Volcengine: one route per dial, one index.
        assert ids(callback(c, base, "plain", "备份")) == LEXICAL[::-1]  # reranked: reversed
        assert ids(callback(c, base, "norerank", "备份")) == LEXICAL  # rerank = false: BM25's order
        assert ids(callback(c, base, "cand2", "备份")) == ["d1", "d0", "d2", "d3", "d4"]  # two reranked
        # The reranker scores the five chunks 1/6 .. 5/6 (reverse mode): 0.5 keeps the last three,
        # whatever their relevance before it (the route's floor, 0, judged that).
        assert ids(callback(c, base, "thr", "备份")) == ["d4", "d3", "d2"]
        # A floor alone judges the reranker's score (1/6 .. 5/6): the last three pass 0.5. With a
        # rerank threshold the two bars are apart: the floor judges the relevance before the
        # reranker (each page holds the whole question), the threshold the reranker's score.
        assert ids(callback(c, base, "floor", "备份")) == ["d4", "d3", "d2"]
        assert ids(callback(c, base, "apart", "备份")) == LEXICAL[::-1]
        plain = callback(c, base, "plain", "演练")
        near = callback(c, base, "near", "演练")
        assert ids(plain) == ids(near) and ids(near)[0].startswith("runbook#")
        alone, widened = plain[0]["KnowledgeContent"], near[0]["KnowledgeContent"]
        assert "恢复演练" in alone  # the hit's chunk, with no other chunk appended (none other matches)
        at = widened.index(alone)  # the same chunk, with the chunks before and after it, in order
        assert at > 0 and len(widened) > at + len(alone) and widened.count("恢复演练") == 1
        assert len(widened) <= 3 * 600  # one chunk (at most 600 characters) on each side only
        # Dify: alice's knowledge (no dials) and bob's (rerank off, neighbours 1).
        assert [r["metadata"]["document_id"] for r in dify(c, base, TOKEN_ALICE, "support", "备份")] == \
            LEXICAL[::-1]
        assert [r["metadata"]["document_id"] for r in dify(c, base, TOKEN_BOB, "support_lex", "备份")] == LEXICAL
        assert dify(c, base, TOKEN_ALICE, "support", "演练")[0]["content"] == alone
        assert dify(c, base, TOKEN_BOB, "support_lex", "演练")[0]["content"] == widened
        # The knowledge protocol, the tool API and MCP reach the same agent routes.
        assert knowledge_titles(c, base, TOKEN_ALICE, "support", "备份") == titles(LEXICAL[::-1][:3])
        assert knowledge_titles(c, base, TOKEN_BOB, "support_lex", "备份") == titles(LEXICAL[:3])
        assert tool_ids(c, base, TOKEN_ALICE, "备份") == LEXICAL[::-1]
        assert tool_ids(c, base, TOKEN_BOB, "备份") == LEXICAL
        assert anyio.run(_mcp_titles, base, TOKEN_ALICE, "备份")[:5] == titles(LEXICAL[::-1])
        assert anyio.run(_mcp_titles, base, TOKEN_BOB, "备份")[:5] == titles(LEXICAL)
