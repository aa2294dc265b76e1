"""One relevance scale through every wing, end to end: a real `kbgate serve` with a
hybrid index ('docs': HYBRID_DOCS, the embedded model) and a lexical one ('manuals': pages of
AGENT_DOCS), routes on both for the Volcengine tenant and the agent client.

Rationale: docs/design-notes.md, "tests/e2e/test_relevance.py".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from tests.support import harness
from tests.support.callbacks import post
from tests.support.configs import ACME_KEYS, ENV, EVERYTHING, SECRET_ACME, TOKEN_ALICE, client, config, tenant, write
from tests.support.documents import AGENT_DOCS, HYBRID_DOCS, as_jsonl
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.paths import ROOT

OFFTOPIC = "红烧肉要用砂锅还是铁锅炖，炖多长时间才软烂入味"
MANUALS = [d for d in AGENT_DOCS if d.id in ("guide/replay.md", "long/manual.md", "guide/key-rotation.md")]
TOOLS = ["knowledge.search", "search", "dify.retrieval", "mcp.search"]
AUTH = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}


def _site(tmp: Path, port: int) -> Path:
    for name, docs in (("docs", HYBRID_DOCS), ("manuals", MANUALS)):
        (tmp / name).mkdir()
        (tmp / name / "pages.jsonl").write_text(as_jsonl(docs), "utf-8")
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", "docs", "docs"), ("tech", "manuals", "manuals"),
                                                   ("tech", "manuals-all", "manuals")])
    acme["acme"]["routes"][2]["relevance_floor"] = 0  # its own floor: everything the index finds
    alice = client("t1", TOKEN_ALICE, ["support", "manuals"], TOOLS, **EVERYTHING)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}, "manuals": {"index": "manuals"}},
             "clients": {"alice": alice}}
    data = config(tmp, tenants=[acme], port=port, agent=agent,
                  dense={"docs": {"provider": "local", "model": "use-multilingual-v3", "query_timeout_ms": 5000}},
                  access={"sqlite_path": "feedback.sqlite3"})
    return write(tmp / "gateway.toml", data)


def _hybrid_searches(metrics: str) -> float:
    found = re.search(r'^kbgate_hybrid_searches_total{index="docs",outcome="hybrid"} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture(name="site", scope="module")
def _site_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, httpx.Client]]:
    tmp = tmp_path_factory.mktemp("relevance")
    port = free_port()
    cfg = _site(tmp, port)
    for name in ("docs", "manuals"):
        built = harness.kbgate("index", "add", "--config", str(cfg), "--index", name, "--no-progress",
                               str(tmp / name), env=ENV, timeout=300)
        assert built.returncode == 0, built.stderr
    with serve(cfg, port=port, env=ENV, cwd=ROOT) as srv, httpx.Client(timeout=30) as http:
        deadline = time.monotonic() + 60  # the worker loads the model in the background
        while time.monotonic() < deadline:
            post(http, srv.base, SECRET_ACME, second="docs", query="备份到 S3", limit=3)
            if _hybrid_searches(http.get(f"{srv.base}/metrics").text) > 0:
                break
            time.sleep(0.5)
        yield srv, http


def _callback(site: tuple[Server, httpx.Client], second: str, query: str) -> list[dict[str, Any]]:
    srv, http = site
    r = post(http, srv.base, SECRET_ACME, second=second, query=query, limit=5)
    assert r.status_code == 200, r.text
    answer = orjson.loads(r.content)
    assert answer["Ret"] == 0, answer
    return list(answer["Result"])


def _dify(site: tuple[Server, httpx.Client], route: str, query: str, threshold: float = 0.0) -> list[dict[str, Any]]:
    srv, http = site
    r = http.post(f"{srv.base}/dify/retrieval", headers=AUTH, content=orjson.dumps(
        {"knowledge_id": route, "query": query, "retrieval_setting": {"top_k": 5, "score_threshold": threshold}}))
    assert r.status_code == 200, r.text
    return list(r.json()["records"])


def _tool_search(site: tuple[Server, httpx.Client], query: str) -> list[dict[str, Any]]:
    srv, http = site
    r = http.post(f"{srv.base}/agent-access/v1/tools/search", headers=AUTH,
                  content=orjson.dumps({"caller": {"type": "agent"}, "input": {"query": query}}))
    assert r.status_code == 200, r.text
    return list(r.json()["data"]["results"])


def _knowledge(site: tuple[Server, httpx.Client], route: str, query: str) -> dict[str, Any]:
    srv, http = site
    r = http.post(f"{srv.base}/agent-api/v1/workspaces/{route}/knowledge/search", headers=AUTH,
                  content=orjson.dumps({"query": query}))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _mcp(base: str, query: str) -> list[dict[str, Any]]:
    async with connect(base + "/mcp", TOKEN_ALICE) as c:
        return list(payload(await c.call_tool("search", {"query": query}))["results"])


def test_the_model_answers_hybrid(site: tuple[Server, httpx.Client]) -> None:
    srv, http = site
    assert _hybrid_searches(http.get(f"{srv.base}/metrics").text) > 0  # else the hybrid checks below prove nothing


def test_an_offtopic_question_gets_an_empty_answer_from_every_wing(site: tuple[Server, httpx.Client]) -> None:
    assert _callback(site, "manuals-all", OFFTOPIC)  # the index does find something: only a floor empties it
    srv, http = site
    before = _hybrid_searches(http.get(f"{srv.base}/metrics").text)
    for second in ("docs", "manuals"):
        assert _callback(site, second, OFFTOPIC) == []
    for route in ("support", "manuals"):
        body = _knowledge(site, route, OFFTOPIC)
        assert body["status"] == "ok" and body["hints"] == []
        assert _dify(site, route, OFFTOPIC) == []
    assert _tool_search(site, OFFTOPIC) == []
    assert anyio.run(_mcp, srv.base, OFFTOPIC) == []
    assert _hybrid_searches(http.get(f"{srv.base}/metrics").text) >= before + 5  # answered hybrid, not lexically


def test_dify_threshold_half_keeps_the_strong_hit_on_lexical_and_hybrid_indexes(
        site: tuple[Server, httpx.Client]) -> None:
    hybrid = _dify(site, "support", "使用 BR 工具备份到 S3", threshold=0.5)
    assert [r["metadata"]["document_id"] for r in hybrid][:1] == ["br"] and hybrid[0]["score"] >= 0.5
    lexical = _dify(site, "manuals", "随机串 时间窗口 重复投递", threshold=0.5)
    assert [r["metadata"]["document_id"] for r in lexical][:1] == ["guide/replay.md"] and lexical[0]["score"] >= 0.5
    assert all(0.5 <= r["score"] <= 1 for r in hybrid + lexical)


def test_a_two_index_merge_ranks_the_strong_hit_first(site: tuple[Server, httpx.Client]) -> None:
    query = "随机串 使用 BR 工具把全量数据备份到 S3 对象存储"
    weak = _callback(site, "manuals-all", query)  # the replay page shares 随机串 and 使用: a weak BM25 match
    assert [i["Id"] for i in weak][:1] == ["guide/replay.md"]
    results = _tool_search(site, query)
    assert results[0]["citation"]["docId"] == "br" and results[0]["score"] >= max(r["score"] for r in results)
    srv, _ = site
    assert anyio.run(_mcp, srv.base, query)[0]["title"] == "备份"
