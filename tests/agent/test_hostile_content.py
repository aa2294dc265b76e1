"""Hostile content through every wing: cover image URLs that are not http(s), document names
holding control, format (zero-width, bidi override) characters, and queries of invisible
characters alone (nothing unchecked reaches a caller).

Rationale: docs/design-notes.md, "tests/agent/test_hostile_content.py".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import orjson
import pytest

import indexes.writer
from gateway.volcengine.signing import sign_headers
from indexes.ingest.jsonl import read_jsonl
from indexes.schema import CLEAN_AT_INGEST, SIDECAR
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.agent_env import AppEnv
from tests.support.configs import ACME_KEYS, EVERYTHING, NOW, SECRET_ACME, client, config, parse, tenant
from tests.support.mcp_env import connect

pytestmark = pytest.mark.anyio

TOKEN = "content-token-CCCCCCCCCCCCCCCCCCCCC"
MARK = "隐形标识QZV"  # in every record with a hostile name: must never leave the gateway
COVERS = [
    {"id": "cover-js", "title": "封面脚本", "content": "封面测试页一。",
     "cover_image": "javascript:alert(document.cookie)"},
    {"id": "cover-data", "title": "封面数据", "content": "封面测试页二。",
     "cover_image": {"url": "data:image/png;base64,AAAA"}},
    {"id": "cover-ok", "title": "封面正常", "content": "封面测试页三。",
     "cover_image": {"url": "https://img.example/ok.png", "height": 10, "width": 20}},
]
HOSTILE_NAMES = ["\u200bconfig/zw.md", "w\u001b[2Jx", "a\u202egpj.md", "soft\u00adhyphen", "ｃｏｎｆｉｇ/wide.md"]
TOOLS = ["mcp.search", "mcp.fetch", "dify.retrieval", "search", "get_page", "get_page.full_text"]
# Invisible alone: every one is refused as an empty query, like ZWSP and U+3000 always were.
INVISIBLE = ["\u115f", "\u1160", "\u3164", "\uffa0", "\u00ad", "\U000e0020", "\u200b", "\u3000", "\u00a0", "\ufeff",
             "\u2060", "\u180e", "\u2028", "\u202e", "\u0085", "\u001b"]


class Env(AppEnv):

    async def callback(self, query: str, limit: int = 10) -> httpx.Response:
        raw = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": query, "Limit": limit})
        headers = sign_headers(SECRET_ACME, raw, NOW)
        headers["content-type"] = headers.pop("Content-Type")
        return await self.http.post("/volcengine/acme", content=raw, headers=headers)

    async def dify(self, query: str) -> httpx.Response:
        return await self.post("/dify/retrieval", {"knowledge_id": "support", "query": query,
                                                   "retrieval_setting": {"top_k": 10, "score_threshold": 0}})


@pytest.fixture(name="env")
async def _env(private_index: Path, tmp_path: Path, start_app: Any, redis_url: str,
               monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    jsonl = tmp_path / "covers.jsonl"
    jsonl.write_text("".join(orjson.dumps(r).decode() + "\n" for r in COVERS), "utf-8")
    writer = IndexStore(private_index).create_or_open_for_write("docs")
    with monkeypatch.context() as m:  # as an older index: the reader alone, a writer that did not clean
        m.setattr(indexes.writer, "clean_document", lambda doc: (doc, []))
        writer.ingest(read_jsonl(jsonl), progress=False)
    sidecar = private_index / "docs" / SIDECAR  # ... and no clean-at-ingest mark: served through clean_hit
    sidecar.write_text(json.dumps({k: v for k, v in json.loads(sidecar.read_text()).items() if k != CLEAN_AT_INGEST}))
    writer.ingest([Document(n, "隐形名称页", (Section("", f"{MARK}：隐形名称测试。"),)) for n in HOSTILE_NAMES],
                  progress=False)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs", "relevance_floor": 0.0}},
             "clients": {"hc": client("h1", TOKEN, ["support"], TOOLS, **EVERYTHING)}}
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])
    cfg = parse(config(tmp_path, tenants=[acme], indexes=private_index, redis_url=redis_url,
                       key_prefix="kbgate-content", agent=agent, search={"relevance_floor": 0.0}), tmp_path)
    http, app, _ = await start_app(cfg)
    yield Env(app, http, cfg, TOKEN, "hc")


async def test_the_hostile_records_are_in_the_index(env: Env) -> None:
    idx = env.app.runtime.index("docs")
    for n in HOSTILE_NAMES:
        assert idx.get_document(n) is not None, n
    doc = idx.search("封面测试", limit=10)
    assert {h.cover_image.url for h in doc if h.cover_image} >= {"javascript:alert(document.cookie)"}


async def test_the_callback_serves_only_http_s_cover_images(env: Env) -> None:
    r = await env.callback("封面测试")
    answer = orjson.loads(r.content)
    assert r.status_code == 200 and answer["Ret"] == 0, r.text
    by_id = {item["Id"]: item for item in answer["Result"]}
    assert {"cover-js", "cover-data", "cover-ok"} <= set(by_id), by_id.keys()
    assert "CoverImage" not in by_id["cover-js"] and "CoverImage" not in by_id["cover-data"]
    assert by_id["cover-ok"]["CoverImage"] == {"Url": "https://img.example/ok.png", "Height": 10, "Width": 20}
    assert "javascript:" not in r.text and "data:image" not in r.text


def _clean(text: str) -> None:
    assert MARK not in text, text
    assert not any(n in text or orjson.dumps(n).decode().strip('"') in text for n in HOSTILE_NAMES), text


async def test_no_wing_serves_a_name_holding_invisible_characters(env: Env) -> None:
    r = await env.callback("隐形名称测试")
    assert r.status_code == 200 and orjson.loads(r.content)["Ret"] == 0, r.text
    _clean(r.text)
    r = await env.dify("隐形名称测试")
    assert r.status_code == 200, r.text
    _clean(r.text)
    r = await env.tool("search", {"query": "隐形名称测试", "limit": 50})
    assert r.status_code == 200, r.text
    _clean(r.text)
    async with connect("http://kbgate/mcp", TOKEN, transport=httpx2.ASGITransport(app=env.app)) as c:
        found = await c.call_tool("search", {"query": "隐形名称测试"})
        assert not found.is_error
        _clean(orjson.dumps(found.model_dump(mode="json")).decode())


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_get_page_refuses_a_name_holding_invisible_characters(env: Env, name: str) -> None:
    r = await env.tool("get_page", {"documentId": name, "fullText": True})
    assert r.status_code in (403, 404), r.text
    _clean(r.text)


@pytest.mark.parametrize("query", INVISIBLE, ids=[f"U+{ord(q):04X}" for q in INVISIBLE])
async def test_a_query_of_invisible_characters_is_refused_as_empty(env: Env, query: str) -> None:
    r = await env.callback(query + query)
    answer = orjson.loads(r.content)
    assert r.status_code == 400 and answer["Ret"] != 0 and answer["Result"] == [], r.text
    r = await env.dify(f" {query} ")
    assert r.status_code == 400 and "records" not in orjson.loads(r.content), r.text
