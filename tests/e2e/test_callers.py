"""One grant model, whichever platform asks: the same question through the five
callers — the Volcengine callback, the knowledge protocol, the tool API, Dify's External
Knowledge API and MCP — finds the same top document when their scopes are the same.

Rationale: docs/design-notes.md, "tests/e2e/test_callers.py".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.callbacks import post as callback
from tests.support.configs import ENV, TOKEN_ALICE, every_caller, write
from tests.support.harness import Server, bearer_json, free_port, serve
from tests.support.mcp_env import connect, payload

pytestmark = pytest.mark.anyio

GRANTS = ("knowledge.search", "knowledge.read", "search", "dify.retrieval", "mcp.search", "mcp.fetch")
# Three questions whose best pages differ (tests.support.documents.AGENT_DOCS).
QUESTIONS = ("密钥轮换", "重放攻击的随机串能用几次", "部署时密钥放在哪里")


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("callers")
    port = free_port()
    data = every_caller(root, docs_index, port=port, redis_url=redis_url, name="callers", grants=GRANTS)
    with serve(write(root / "gateway.toml", data), port=port, env=ENV) as s:
        yield s


def _bearer(srv: Server, path: str, body: dict[str, Any]) -> Any:
    return bearer_json(srv.base + path, TOKEN_ALICE, body)


async def _tops(srv: Server, query: str) -> dict[str, str]:
    """caller → the title of its best result for `query`."""
    with httpx.Client(timeout=10) as c:
        env = orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query=query, limit=5).content)
    assert env["Ret"] == 0, env
    tops = {"volcengine": env["Result"][0]["Title"]}
    hints = _bearer(srv, "/agent-api/v1/workspaces/support/knowledge/search", {"query": query, "limit": 3})["hints"]
    tops["knowledge"] = hints[0]["title"]
    tool = _bearer(srv, "/agent-access/v1/tools/search", {"caller": {"type": "agent"}, "input": {"query": query}})
    tops["tools"] = tool["data"]["results"][0]["title"]
    dify = _bearer(srv, "/dify/retrieval", {"knowledge_id": "support", "query": query, "metadata_condition": None,
                                            "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}})
    tops["dify"] = dify["records"][0]["title"]
    async with connect(srv.base + "/mcp", TOKEN_ALICE) as m:
        tops["mcp"] = payload(await m.call_tool("search", {"query": query}))["results"][0]["title"]
    return tops


async def test_the_same_question_finds_the_same_top_document_through_every_caller(srv: Server) -> None:
    seen: list[str] = []
    for query in QUESTIONS:
        tops = await _tops(srv, query)
        assert set(tops) == {"volcengine", "knowledge", "tools", "dify", "mcp"}
        assert len(set(tops.values())) == 1, (query, tops)
        seen.append(tops["volcengine"])
    assert len(set(seen)) == len(QUESTIONS), seen  # three questions, three different pages: not a constant answer
