"""The rerank stage end to end: every caller answers in the reranked order (the real rerank
server in "reverse" mode); with it slow, then down, every caller answers in the lexical order
within its deadline and /metrics counts each fallback."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from indexes.types import Document, Section
from tests.support import harness
from tests.support.callbacks import answered, result_ids
from tests.support.configs import ACME_KEYS, ENV, EVERYTHING, SECRET_ACME, TOKEN_ALICE, client, config, tenant, write
from tests.support.documents import as_jsonl
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.paths import ROOT
from tests.support.rerank_server import PATHS
from tests.support.rerank_server import running as rerank_server

# Five documents that all match 备份, each more often than the next: BM25 ranks d0 first.
DOCS = [Document(f"d{i}", f"第{i}篇", (Section("", "备份 " * (6 - i) + "其他内容" * (i + 1)),), dataset="public")
        for i in range(5)]
LEXICAL = ["d0", "d1", "d2", "d3", "d4"]
AUTH = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}


def write_site(tmp: Path, port: int, rerank: dict[str, Any]) -> Path:
    (tmp / "docs").mkdir()
    (tmp / "docs" / "pages.jsonl").write_text(as_jsonl(DOCS), "utf-8")
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", "docs", "docs")])
    alice = client("t1", TOKEN_ALICE, ["support"], ["knowledge.search", "search", "dify.retrieval", "mcp.search"],
                   **EVERYTHING)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}}, "clients": {"alice": alice}}
    data = config(tmp, tenants=[acme], port=port, agent=agent, access={"sqlite_path": "feedback.sqlite3"})
    data["indexes"]["docs"] = {"rerank": rerank}
    return write(tmp / "gateway.toml", data)


def callback_ids(c: httpx.Client, base: str, query: str, limit: int) -> list[str]:
    got = answered(c, base, SECRET_ACME, second="docs", query=query, limit=limit)
    assert got["Ret"] == 0, got
    return result_ids(got)


def dify_ids(c: httpx.Client, base: str, query: str, top_k: int) -> list[str]:
    r = c.post(f"{base}/dify/retrieval", headers=AUTH, content=orjson.dumps(
        {"knowledge_id": "support", "query": query, "retrieval_setting": {"top_k": top_k, "score_threshold": 0}}))
    assert r.status_code == 200, r.text
    return [rec["metadata"]["document_id"] for rec in r.json()["records"]]


def tool_ids(c: httpx.Client, base: str, query: str, limit: int) -> list[str]:
    r = c.post(f"{base}/agent-access/v1/tools/search", headers=AUTH, content=orjson.dumps(
        {"caller": {"type": "agent"}, "input": {"query": query, "limit": limit}}))
    assert r.status_code == 200, r.text
    return [res["citation"]["docId"] for res in r.json()["data"]["results"]]


def knowledge_titles(c: httpx.Client, base: str, query: str, limit: int) -> list[str]:
    r = c.post(f"{base}/agent-api/v1/workspaces/support/knowledge/search", headers=AUTH,
               content=orjson.dumps({"query": query, "limit": limit}))
    assert r.status_code == 200, r.text
    return [h["title"] for h in r.json()["hints"]]


async def _mcp_titles(base: str, query: str, limit: int) -> list[str]:
    async with connect(base + "/mcp", TOKEN_ALICE) as c:
        found = payload(await c.call_tool("search", {"query": query}))["results"]  # mcp.max_results of them
    return [str(f["title"]) for f in found][:limit]


def titles(ids: list[str]) -> list[str]:
    return [f"第{i[1:]}篇" for i in ids]


def rerank_calls(metrics: str, outcome: str) -> float:
    found = re.search(rf'^kbgate_rerank_calls_total{{index="docs",outcome="{outcome}"}} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def every_caller(c: httpx.Client, base: str, query: str, limit: int) -> dict[str, list[str]]:
    """The document order each caller got (titles mapped back to ids where a caller shows titles)."""
    by_title = {f"第{i}篇": f"d{i}" for i in range(5)}
    return {"volcengine": callback_ids(c, base, query, limit), "dify": dify_ids(c, base, query, limit),
            "tools": tool_ids(c, base, query, limit),
            "knowledge": [by_title[t] for t in knowledge_titles(c, base, query, limit)],
            "mcp": [by_title[t] for t in anyio.run(_mcp_titles, base, query, limit)]}


def test_every_caller_gets_the_reranked_order_and_answers_when_the_reranker_is_slow_or_down(tmp_path: Path) -> None:
    port, rr_port = free_port(), free_port()
    rerank = {"provider": "cohere", "url": f"http://127.0.0.1:{rr_port}{PATHS['cohere']}", "model": "stand-in",
              "timeout_ms": 400, "breaker_failures": 3, "breaker_reset_seconds": 600}
    cfg = write_site(tmp_path, port, rerank)
    built = harness.kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress",
                           str(tmp_path / "docs"), env=ENV, timeout=300)
    assert built.returncode == 0, built.stderr
    srv: Server | None = None
    try:
        with rerank_server(rr_port) as rr, httpx.Client(timeout=30) as c:
            httpx.post(f"{rr}/control", json={"mode": "reverse"}).raise_for_status()
            srv = serve(cfg, port=port, env=ENV, cwd=ROOT).start()
            assert callback_ids(c, srv.base, "备份", 5) == LEXICAL[::-1]  # reversed: the rerank ran
            got = every_caller(c, srv.base, "备份", 3)  # the knowledge protocol's limit is at most 3
            assert got == dict.fromkeys(got, LEXICAL[::-1][:3]), got  # and for every caller
            metrics = c.get(f"{srv.base}/metrics").text
            assert rerank_calls(metrics, "reranked") == 6
            assert "kbgate_rerank_duration_seconds_count" in metrics
            # Slow: past timeout_ms every caller answers in the lexical order, in time.
            httpx.post(f"{rr}/control", json={"delay": 3.0}).raise_for_status()
            t0 = time.monotonic()
            assert callback_ids(c, srv.base, "备份", 4) == LEXICAL[:4]
            assert time.monotonic() - t0 < 1.5
            assert rerank_calls(c.get(f"{srv.base}/metrics").text, "timeout") == 1
        # Down: the rerank server is gone; the breaker opens after 3 failures, answers go on.
        with httpx.Client(timeout=30) as c:
            for limit in (3, 2, 1):  # another text than above: not answered from the answer cache
                t0 = time.monotonic()
                assert callback_ids(c, srv.base, "备份？", limit) == LEXICAL[:limit]
                assert time.monotonic() - t0 < 1.5
            got = every_caller(c, srv.base, "备份！", 3)
            assert got == dict.fromkeys(got, LEXICAL[:3]), got  # the lexical order, none failed
            metrics = c.get(f"{srv.base}/metrics").text
            assert rerank_calls(metrics, "timeout") + rerank_calls(metrics, "error") == 3  # they opened it
            assert rerank_calls(metrics, "breaker_open") >= 5
    finally:
        if srv is not None:
            srv.stop()
