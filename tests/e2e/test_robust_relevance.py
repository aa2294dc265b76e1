"""No single document, and no large body of other text, silences an index (the domain weight
counted in documents with a background prior, indexes/profile.py; docs/search-quality.md).

Rationale: docs/design-notes.md, "tests/e2e/test_robust_relevance.py".
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ENV, client, config, tenant, write
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.polling import after_promise

CMS = "cms-robust-token-0123456789abcdefg"
AUTH = {"authorization": f"Bearer {CMS}", "content-type": "application/json"}
BASE = "/documents/v1/indexes/live"
GRANTS = ["documents.write", "search", "knowledge.search", "dify.retrieval", "mcp.search"]
PAGES = [Document("body.md", "正文内容测试", (Section("", "这是正文内容测试的段落，用于检查检索。"),)),
         Document("guide.md", "部署指南", (Section("安装", "本指南介绍如何在生产环境部署 kbgate。"),
                                          Section("配置", "修改配置文件后重启服务。"))),
         Document("prices.md", "产品价格",
                  (Section("", "产品：基础版，价格：每月 99 元。产品：专业版，价格：每月 299 元。"),))]
QUESTIONS = {"正文内容测试": "body.md", "部署指南": "guide.md", "基础版产品的价格是多少": "prices.md"}
CALLERS = ("volcengine", "tools", "knowledge", "dify", "mcp")


@pytest.fixture(name="live")
def _live(tmp_path: Path, redis_url: str) -> Iterator[Server]:
    indexes = tmp_path / "indexes"
    IndexStore(indexes).create_or_open_for_write("live").ingest(PAGES, progress=False)
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "live"}},
             "clients": {"cms": client("c1", CMS, ["support"], GRANTS, write_indexes=["live"], datasets=["*"],
                                       path_globs=["**"])}}
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "live")])],
                  indexes=indexes, port=port, workers=1, redis_url=redis_url, key_prefix=f"kbgate-robust-{port}",
                  agent=agent, audit={"sink": "off"})
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV, workers=1) as srv:
        yield srv


def _post(srv: Server, path: str, body: dict[str, Any]) -> Any:
    r = httpx.post(srv.base + path, content=orjson.dumps(body), timeout=30, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


async def _tops(srv: Server) -> dict[tuple[str, str], str | None]:
    """(caller, question) → the document id (or title) of the first result, None for none."""
    tops: dict[tuple[str, str], str | None] = {}
    async with connect(srv.base + "/mcp", CMS) as m:
        for q in QUESTIONS:
            with httpx.Client(timeout=30) as c:
                r = callback(c, srv.base, ENV["ACME_SECRET"], query=q, limit=3)
            env = orjson.loads(r.content)
            assert r.status_code == 200 and env["Ret"] == 0, r.text
            tops["volcengine", q] = env["Result"][0]["Id"].split("#")[0] if env["Result"] else None
            tool = _post(srv, "/agent-access/v1/tools/search", {"caller": {"type": "agent"}, "input": {"query": q}})
            results = tool["data"]["results"]
            tops["tools", q] = results[0]["citation"]["docId"] if results else None
            hints = _post(srv, "/agent-api/v1/workspaces/support/knowledge/search", {"query": q, "limit": 3})["hints"]
            tops["knowledge", q] = hints[0]["title"] if hints else None
            dify = _post(srv, "/dify/retrieval", {"knowledge_id": "support", "query": q,
                                                  "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})
            tops["dify", q] = dify["records"][0]["metadata"]["document_id"] if dify["records"] else None
            found = payload(await m.call_tool("search", {"query": q}))["results"]
            tops["mcp", q] = found[0]["title"] if found else None
    return tops


def _expected() -> dict[tuple[str, str], str]:
    title = {d.id: d.title for d in PAGES}
    return {(caller, q): (title[doc] if caller in ("knowledge", "mcp") else doc)
            for caller in CALLERS for q, doc in QUESTIONS.items()}


def _write(srv: Server, method: str, path: str, *, content: bytes, content_type: str, shows: str) -> None:
    """The write, answered and committed; returns once the index the callers search holds
    document `shows` (its GET answers 200), so what is asked next is asked of the new commit."""
    r = httpx.request(method, srv.base + path, content=content, timeout=300,
                      headers={"authorization": AUTH["authorization"], "content-type": content_type})
    answered = time.monotonic()
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["committed"], data
    after_promise(answered, data["visibleWithinSeconds"],
                  lambda: httpx.get(f"{srv.base}{BASE}/documents/{shows}", headers=AUTH, timeout=30).status_code == 200,
                  what=f"document {shows} is served")


def test_a_9_mib_document_of_one_character_silences_no_question_on_any_caller(live: Server) -> None:
    assert anyio.run(_tops, live) == _expected()
    big = ("# 测试\n\n" + "啊" * (9 * 1024 * 1024 // 3 - 8)).encode()
    assert 9 * 1024 * 1024 - 16 <= len(big) <= 9 * 1024 * 1024
    _write(live, "PUT", f"{BASE}/documents/big.md", content=big, content_type="text/markdown", shows="big.md")
    assert anyio.run(_tops, live) == _expected()


def test_a_large_body_of_latin_pages_silences_no_chinese_question_on_any_caller(live: Server) -> None:
    assert anyio.run(_tops, live) == _expected()
    rnd = random.Random(7)
    words = ("the server config deploy cluster node storage backup restore query index table column user role "
             "grant network port latency").split()
    pages = [{"id": f"en/{i}.md", "title": f"Page {i}",
              "content": "\n\n".join(f"## Part {j}\n\n" + " ".join(rnd.choice(words) for _ in range(120)) + "."
                                     for j in range(11))} for i in range(300)]
    _write(live, "POST", f"{BASE}/batch", content=orjson.dumps({"upserts": pages}), content_type="application/json",
           shows="en/299.md")
    assert anyio.run(_tops, live) == _expected()
