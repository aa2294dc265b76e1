"""The never-readable trees (`config/**`, `state/**`; Agent Access API 技术设计 §8, §13) apply to
every name a document can be reached by: a JSONL record whose `id` is `config/secret.md` stays
invisible through every wing, refs minted in the older format included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import orjson
import pytest
from mcp_types import CallToolResult

from gateway.core.refs import Holder, RefSigner
from gateway.core.scope import Principal, agent_configuration, resolve_agent, scope_revision
from gateway.core.types import Secret
from indexes.ingest.jsonl import read_jsonl
from indexes.store import IndexStore
from tests.support.agent_env import AppEnv
from tests.support.configs import ACME, EVERYTHING, REF_KEY, client, config, parse
from tests.support.mcp_env import connect

pytestmark = pytest.mark.anyio

TOKEN = "identity-token-IIIIIIIIIIIIIIIIIIII"
MARK = "绝密口令ZQX"  # in every hostile record; must never leave the gateway
HOSTILE = [
    {"id": "config/secret.md", "title": "密钥轮换口令", "content": f"{MARK}：密钥轮换的管理员口令。"},
    {"id": "CONFIG/upper.md", "title": "密钥轮换口令大写", "content": f"{MARK}：密钥轮换的口令表。"},
    {"id": "/state/slash.md", "title": "密钥轮换状态", "content": f"{MARK}：密钥轮换的状态。"},
    {"id": "./config/dot.md", "title": "密钥轮换点", "content": f"{MARK}：密钥轮换的配置。"},
    {"id": "working/jsonl-draft.md", "title": "密钥轮换草案", "content": f"{MARK}：密钥轮换的草案。"},
    {"id": "config/aliased.md", "path": "guide/aliased.md", "title": "密钥轮换别名",
     "content": f"{MARK}：密钥轮换的别名页。", "dataset": "public"},
]
HOSTILE_IDS = [r["id"] for r in HOSTILE]
WALKS = {"./config/dot.md"}  # refused by the reader now (a '.' segment); an index built before holds it
INDEXED_IDS = [i for i in HOSTILE_IDS if i not in WALKS]
TOOLS = ["knowledge.search", "knowledge.read", "mcp.search", "mcp.fetch", "dify.retrieval", "search", "get_page",
         "get_page.full_text", "get_context"]


class Env(AppEnv):

    def ref(self, doc_id: str, revision: str) -> str:
        """A ref for `doc_id` as an older gateway minted it from a search hit (right holder,
        revision and scope revision)."""
        principal = Principal("agent_client", "idc", "i1", "token:i1")
        route, eff = resolve_agent(self.cfg.agent, self.cfg.agent.clients["idc"], principal, "support", None)
        idx = self.app.runtime.index(eff.index)
        scope_rev = scope_revision(eff, agent_configuration(route, self.cfg.agent.clients["idc"]), idx.generation)
        signer = RefSigner(Secret(REF_KEY), self.app.runtime.clock)
        return signer.mint_for(Holder("idc", "token:i1", None, "support"), scope_rev, doc_id, revision)[0]


@pytest.fixture(name="env")
async def _env(private_index: Path, tmp_path: Path, start_app: Any, redis_url: str) -> AsyncIterator[Env]:
    jsonl = tmp_path / "hostile.jsonl"
    jsonl.write_text("".join(orjson.dumps(r).decode() + "\n" for r in HOSTILE), "utf-8")
    report = IndexStore(private_index).create_or_open_for_write("docs").ingest(read_jsonl(jsonl), progress=False)
    assert len(report.errors) == len(WALKS), report  # each walk refused by the reader, nothing else
    # floor 0: this file judges which names are never shown, not relevance; every visible hit is kept
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs", "relevance_floor": 0.0}},
             "clients": {"idc": client("i1", TOKEN, ["support"], TOOLS, **EVERYTHING)}}
    cfg = parse(config(tmp_path, tenants=[ACME], indexes=private_index, redis_url=redis_url,
                       key_prefix="kbgate-identities", agent=agent), tmp_path)
    http, app, _ = await start_app(cfg)
    yield Env(app, http, cfg, TOKEN, "idc")


def _clean(r: httpx.Response | CallToolResult) -> str:
    text = r.text if isinstance(r, httpx.Response) else orjson.dumps(r.model_dump(mode="json")).decode()
    assert MARK not in text
    assert all(i.lstrip("./") not in text for i in HOSTILE_IDS), text
    return text


async def test_the_hostile_records_are_in_the_index(env: Env) -> None:
    idx = env.app.runtime.index("docs")
    assert all(idx.get_document(i) is None for i in WALKS)  # refused at ingest: a name that walks a tree
    for i in INDEXED_IDS:
        doc = idx.get_document(i)
        assert doc is not None and MARK in doc.text, i


async def test_tool_api_search_and_context_never_show_them(env: Env) -> None:
    r = await env.tool("search", {"query": "密钥轮换 口令", "limit": 50})
    assert r.status_code == 200 and orjson.loads(r.content)["data"]["results"], r.text
    _clean(r)
    r = await env.tool("get_context", {"question": "密钥轮换 口令", "limit": 20})
    assert r.status_code == 200, r.text
    _clean(r)


@pytest.mark.parametrize("doc_id", HOSTILE_IDS)
async def test_get_page_by_id_refuses_them(env: Env, doc_id: str) -> None:
    r = await env.tool("get_page", {"documentId": doc_id, "fullText": True})
    assert r.status_code in (403, 404), r.text
    assert orjson.loads(r.content)["errors"][0]["code"] in ("access.forbidden_scope", "access.page_not_found")
    _clean(r)


async def test_get_page_and_context_by_a_visible_path_refuse_an_excluded_id(env: Env) -> None:
    r = await env.tool("get_page", {"path": "guide/aliased.md", "fullText": True})
    assert r.status_code == 404, r.text
    _clean(r)
    r = await env.tool("get_context", {"paths": ["guide/aliased.md"]})
    _clean(r)


async def test_dify_never_shows_them(env: Env) -> None:
    r = await env.post("/dify/retrieval", {"knowledge_id": "support", "query": "密钥轮换 口令",
                                           "retrieval_setting": {"top_k": 10, "score_threshold": 0}})
    assert r.status_code == 200 and orjson.loads(r.content)["records"], r.text
    _clean(r)


async def test_knowledge_protocol_search_and_read_refuse_them(env: Env) -> None:
    r = await env.post("/agent-api/v1/workspaces/support/knowledge/search", {"query": "密钥轮换 口令", "limit": 3})
    assert r.status_code == 200 and orjson.loads(r.content)["hints"], r.text
    _clean(r)
    idx = env.app.runtime.index("docs")
    for i in INDEXED_IDS:
        doc = idx.get_document(i)
        assert doc is not None
        r = await env.post("/agent-api/v1/workspaces/support/knowledge/read", {"ref": env.ref(i, doc.revision)})
        assert r.status_code == 409, (i, r.text)
        _clean(r)


async def test_mcp_search_and_fetch_refuse_them(env: Env) -> None:
    idx = env.app.runtime.index("docs")
    async with connect("http://kbgate/mcp", TOKEN, transport=httpx2.ASGITransport(app=env.app)) as c:
        found = await c.call_tool("search", {"query": "密钥轮换 口令"})
        assert not found.is_error and found.structured_content and found.structured_content["results"]
        _clean(found)
        for i in INDEXED_IDS:
            doc = idx.get_document(i)
            assert doc is not None
            got = await c.call_tool("fetch", {"id": env.ref(i, doc.revision)})
            assert got.is_error, i
            _clean(got)
