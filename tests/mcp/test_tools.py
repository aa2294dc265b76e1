"""gateway/mcp/tools.py and server.py in-process: the SDK's own client over httpx2's ASGI
transport to the app under its lifespan, with the app's injected clock and a private copy of
the test index, so ids can expire, documents change, policies move and indexes fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import orjson
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from gateway.core.clock import FixedClock
from gateway.core.errors import DependencyUnavailable
from gateway.mcp.server import _TOOLS, INTERNAL_TEXT, call_of
from gateway.mcp.tools import document_url
from gateway.serve.app import Gateway
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.configs import ACME, EVERYTHING, client, config, parse
from tests.support.documents import AGENT_DOCS, LONG_TEXT
from tests.support.mcp_env import MCP_GRANTS, TOKEN_ALICE, TOKEN_CAROL, TOP, connect, mcp_agent_section, payload

pytestmark = pytest.mark.anyio
URL = "http://kbgate/mcp"


@dataclass
class App:
    app: Gateway
    clock: FixedClock
    root: Path

    @asynccontextmanager
    async def connect(self, token: str | None = TOKEN_ALICE, mode: str = "legacy") -> AsyncIterator[Client]:
        async with connect(URL, token, mode=mode, transport=httpx2.ASGITransport(app=self.app)) as c:
            yield c

    def audit(self) -> list[dict[str, Any]]:
        p = self.root / "audit.jsonl"
        return [orjson.loads(x) for x in p.read_bytes().splitlines()] if p.exists() else []

    def reingest(self, docs: list[Document], *, delete_missing: bool = False) -> None:
        IndexStore(self.root / "indexes").create_or_open_for_write("docs").ingest(
            docs, delete_missing=delete_missing, progress=False)
        self.app.runtime.indexes.open("docs").maybe_reload(force=True)

    def reconfigure(self, **kw: Any) -> None:
        """Swap the config as a reload does."""
        self.app.runtime.config = _config(self.root, self.app.runtime.config.replay.redis_url or "", **kw)


def _config(root: Path, redis_url: str, *, agent: dict[str, Any] | None = None,
            mcp: dict[str, Any] | None = None) -> Any:
    if agent is None:
        agent = mcp_agent_section()
        agent["routes"]["kbroute"] = {"index": "kb"}  # documents with URLs and publish times
        agent["clients"]["alice"]["routes"].append("kbroute")
    data = config(root, tenants=[ACME], indexes=root / "indexes", redis_url=redis_url, key_prefix="kbgate-mcp",
                  agent=agent, audit={"sink": "file", "path": str(root / "audit.jsonl")},
                  **({"mcp": mcp} if mcp else {}))
    return parse(data, root)


AppFactory = Callable[..., Awaitable[App]]


@pytest.fixture(name="start")
def _start(root: Path, start_app: Callable[..., Any], redis_url: str) -> AppFactory:
    async def factory(**kw: Any) -> App:
        _, app, clock = await start_app(_config(root, redis_url, **kw))
        return App(app, clock, root)

    return factory


async def _search(c: Client, query: str = "密钥轮换", **kw: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = payload(await c.call_tool("search", {"query": query, **kw}))["results"]
    return results


def _error(result: CallToolResult) -> str:
    assert result.is_error, result
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


# ------------------------------------------------------------------ search


async def test_search_spans_every_route_of_the_client_one_result_per_document(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        everything = await _search(c)
        ops_only = await _search(c, route="ops")
        kb = await _search(c, route="kbroute")
    urls = [r["url"] for r in everything]
    assert len(urls) == len(set(urls)) and f"kbgate://support/{TOP}" in urls
    assert "https://kb.example.com/1" in urls  # a document's own URL when the index holds one
    assert ops_only and all(r["url"].startswith("kbgate://ops/ops/") for r in ops_only)
    assert [r["url"] for r in kb][:1] == ["https://kb.example.com/1"]
    line = [x for x in a.audit() if x["tool"] == "mcp.search"][0]
    assert line["route"] == "support,ops,kbroute" and len(line["scope"]["routes"]) == 3  # 'off' is disabled


async def test_search_stays_inside_the_clients_scope(start: AppFactory) -> None:
    a = await start()
    async with a.connect(TOKEN_CAROL) as c:  # public guide/** only
        found = await _search(c)
    assert found and all(r["url"].startswith("kbgate://support/guide/") for r in found)
    assert "guide/replay.md" not in str(found)  # dataset internal
    async with a.connect() as c:
        titles = [r["title"] for r in await _search(c, "密钥轮换 草稿 状态 配置 隐藏")]
    assert not {"密钥轮换草稿", "密钥轮换状态", "密钥轮换配置", "密钥轮换内部"} & set(titles)


async def test_no_match_is_an_empty_list(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        assert await _search(c, "zzzqqqxxx") == []


@pytest.mark.parametrize(("arguments", "says"), [
    ({}, "query is required"),
    ({"query": "  "}, "query"),
    ({"query": "\u200b\u3000\u200b"}, "query must not be empty"),
    ({"query": 5}, "query must be a string"),
    ({"query": "密" * 1001}, "query"),
    ({"query": "密钥", "limit": 3}, "limit is not a known field"),
    ({"query": "密钥", "route": "nowhere"}, "route must be one of support, ops, off, kbroute"),
])
async def test_bad_search_arguments_are_a_tool_error(start: AppFactory, arguments: dict[str, Any], says: str) -> None:
    a = await start()
    async with a.connect() as c:
        text = _error(await c.call_tool("search", arguments))
    assert text.startswith("Invalid arguments") and says in text
    assert a.audit()[-1]["code"] == "mcp.arguments_invalid" and a.audit()[-1]["outcome"] == "failed"


async def test_a_disabled_route_named_is_a_tool_error(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        assert "disabled" in _error(await c.call_tool("search", {"query": "密钥轮换", "route": "off"}))


async def test_indexes_down(start: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    a = await start()
    rt = a.app.runtime
    opened = rt.index

    def kb_down(name: str) -> Any:
        if name == "kb":
            raise DependencyUnavailable("index_unavailable", "down")
        return opened(name)

    async with a.connect() as c:
        ident = (await _search(c))[0]["id"]
        monkeypatch.setattr(rt, "index", kb_down)
        assert await _search(c)  # the other routes answer
        assert a.audit()[-1]["outcome"] == "partial" and a.audit()[-1]["routes_failed"] == ["kbroute"]
        monkeypatch.setattr(rt, "index", lambda name: kb_down("kb"))
        assert "unavailable" in _error(await c.call_tool("search", {"query": "密钥轮换"}))
        assert a.audit()[-1]["code"] == "mcp.unavailable"
        assert "unavailable" in _error(await c.call_tool("fetch", {"id": ident}))
        assert a.audit()[-1]["code"] == "knowledge_unavailable"


# ------------------------------------------------------------------ fetch


async def test_fetch_gives_the_document_with_its_metadata(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        kb = (await _search(c, route="kbroute"))[0]
        doc = payload(await c.call_tool("fetch", {"id": kb["id"]}))
    assert doc["url"] == "https://kb.example.com/1" and doc["title"] == "密钥轮换"
    assert doc["metadata"]["publish_time"] == "2023-11-14T22:13:20Z" and doc["metadata"]["dataset"] == "kb"


async def test_a_long_document_is_cut_between_characters(start: AppFactory) -> None:
    a = await start(mcp={"fetch_max_bytes": 1025})
    async with a.connect() as c:
        manual = next(r for r in await _search(c, "运维手册 索引重建") if "long/manual.md" in r["url"])
        doc = payload(await c.call_tool("fetch", {"id": manual["id"]}))
    assert doc["metadata"]["truncated"] is True
    assert len(doc["text"].encode("utf-8")) <= 1025 and LONG_TEXT.startswith(doc["text"])
    assert len(doc["text"].encode("utf-8")) > 1000  # cut at the last whole character, not earlier


async def test_an_id_expires_after_its_lifetime(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        ident = (await _search(c))[0]["id"]
        a.clock.advance(300)
        assert payload(await c.call_tool("fetch", {"id": ident}))["text"]
        a.clock.advance(1)
        assert "expired" in _error(await c.call_tool("fetch", {"id": ident}))
    assert a.audit()[-1]["code"] == "knowledge_reference_expired"


@pytest.mark.parametrize("change", ["updated", "deleted", "hidden"])
async def test_an_id_does_not_outlive_a_document_change(start: AppFactory, change: str) -> None:
    a = await start()
    top = next(d for d in AGENT_DOCS if d.id == TOP)
    async with a.connect() as c:
        ident = next(r["id"] for r in await _search(c) if r["url"].endswith(TOP))
        if change == "updated":
            a.reingest([replace(top, sections=(Section("", "新版：密钥轮换改为每季度一次。"),))])
        elif change == "hidden":
            a.reingest([replace(top, qa_visible=False)])
        else:
            a.reingest([d for d in AGENT_DOCS if d.id != TOP], delete_missing=True)
        text = _error(await c.call_tool("fetch", {"id": ident}))
    assert "search" in text and "新版" not in text
    assert a.audit()[-1]["code"] == "knowledge_changed"


async def test_an_id_outlives_a_commit_that_changed_other_documents(start: AppFactory) -> None:
    """Agent知识按需搜索与读取 binds an id to its document's revision, not to the index generation: a commit
    that adds or changes another document leaves it readable."""
    a = await start()
    top = next(d for d in AGENT_DOCS if d.id == TOP)
    async with a.connect() as c:
        ident = next(r["id"] for r in await _search(c) if r["url"].endswith(TOP))
        a.reingest([Document("guide/new.md", "新文档", (Section("", "与密钥无关的新内容。"),), path="guide/new.md")])
        a.reingest([replace(next(d for d in AGENT_DOCS if d.id == "ops/deploy.md"),
                            sections=(Section("", "部署的新说明。"),))])
        got = payload(await c.call_tool("fetch", {"id": ident}))
    assert got["text"] == top.text and got["metadata"]["document_id"] == TOP
    assert a.audit()[-1]["outcome"] == "passed"


async def test_a_policy_change_is_a_scope_change(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        ident = next(r["id"] for r in await _search(c) if r["url"].endswith(TOP))
        agent = mcp_agent_section()
        agent["clients"]["alice"] = client("t1", TOKEN_ALICE, ["support", "ops", "off"], MCP_GRANTS,
                                           datasets=["public", "internal"], path_globs=["**"])
        a.reconfigure(agent=agent)  # the policy the id was minted under moved
        assert "changed" in _error(await c.call_tool("fetch", {"id": ident}))
        assert a.audit()[-1]["code"] == "knowledge_scope_changed"
        a.reconfigure()
        ident = next(r["id"] for r in await _search(c) if r["url"].endswith(TOP))
        agent = mcp_agent_section()
        agent["clients"]["alice"] = client("t1", TOKEN_ALICE, ["ops"], MCP_GRANTS, **EVERYTHING)
        a.reconfigure(agent=agent)  # alice lost the route the id was minted on
        assert _error(await c.call_tool("fetch", {"id": ident})).startswith("Not allowed")
    assert (a.audit()[-1]["outcome"], a.audit()[-1]["code"]) == ("denied", "access.forbidden_scope")


async def test_bad_fetch_arguments_are_a_tool_error(start: AppFactory) -> None:
    a = await start()
    async with a.connect() as c:
        assert "id is required" in _error(await c.call_tool("fetch", {}))
        assert "id must be a string" in _error(await c.call_tool("fetch", {"id": ["x"]}))
        assert "not valid" in _error(await c.call_tool("fetch", {"id": "x" * 2048}))


async def test_an_unknown_tool_is_a_protocol_error(start: AppFactory) -> None:
    a = await start()
    async with a.connect(mode="auto") as c:
        with pytest.raises(MCPError) as err:
            await c.call_tool("delete_everything", {})
    assert err.value.code == -32602
    assert (a.audit()[-1]["tool"], a.audit()[-1]["code"]) == ("mcp.unknown", "mcp.tool_unknown")


def test_document_urls() -> None:
    assert document_url("https://kb.example.com/1", "r", "x") == "https://kb.example.com/1"
    assert document_url(None, "support", "指南/密钥 轮换.md") == (
        "kbgate://support/%E6%8C%87%E5%8D%97/%E5%AF%86%E9%92%A5%20%E8%BD%AE%E6%8D%A2.md")
    assert document_url("", "a.b", "x?y#z") == "kbgate://a.b/x%3Fy%23z"


# ------------------------------------------------------------------ reload


async def test_a_reload_changes_the_allowed_origins_and_hosts(start: AppFactory) -> None:
    a = await start()
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    headers = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json",
               "accept": "application/json", "mcp-protocol-version": "2025-11-25",
               "origin": "https://chat.example.com"}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=a.app)) as http:
        assert (await http.post(URL, content=body, headers=headers)).status_code == 403
        a.reconfigure(mcp={"allowed_origins": ["https://chat.example.com"], "allowed_hosts": ["kb.example.com"]})
        assert (await http.post(URL, content=body, headers=headers)).status_code == 421  # Host 'kbgate'
        assert (await http.post("http://kb.example.com/mcp", content=body, headers=headers)).status_code == 200
        a.reconfigure(mcp={"allowed_origins": ["https://other.example.com"]})
        assert (await http.post(URL, content=body, headers=headers)).status_code == 403


@pytest.mark.parametrize(("url", "host", "status"), [
    ("http://kb.example.com/mcp", "KB.Example.COM", 200),      # a host name in any case
    ("http://kb.example.com/mcp", "kb.example.com:80", 200),   # the default port of http
    ("https://kb.example.com/mcp", "kb.example.com:443", 200),  # … and of https
    ("http://kb.example.com/mcp", "kb.example.com:443", 421),  # not the default port of http
    ("http://kb.example.com/mcp", "kb.example.com:8080", 421),
    ("http://kb.example.com/mcp", "kb.example.com.evil.com", 421),
    ("https://kb.example.com/mcp", "api.example.com", 200),    # listed as api.example.com:443
    ("http://kb.example.com/mcp", "[0:0::1]:8443", 200),        # listed as [::1]:8443
    ("http://kb.example.com/mcp", "[::1]", 421),
    ("http://kb.example.com/mcp", "Local.Test:9", 200),        # listed as local.test:*
])
async def test_allowed_hosts_ignore_case_and_default_ports(start: AppFactory, url: str, host: str,
                                                           status: int) -> None:
    """Host names compare case-insensitively (RFC 9110 §4.2.3), a default port equals no port,
    IPv6 literals compare as addresses; a refusal is the MCP wing's JSON-RPC envelope."""
    a = await start(mcp={"allowed_hosts": ["kb.example.com", "API.example.com:443", "[::1]:8443", "local.test:*"]})
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    headers = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json",
               "accept": "application/json", "mcp-protocol-version": "2025-11-25", "host": host}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=a.app)) as http:
        r = await http.post(url, content=body, headers=headers)
    assert r.status_code == status, r.text
    if status == 421:
        assert r.headers["content-type"] == "application/json"
        error = orjson.loads(r.content)["error"]
        assert error["data"]["code"] == "mcp.host_misdirected" and orjson.loads(r.content)["id"] is None
        assert a.audit()[-1]["code"] == "mcp.host_misdirected"


# ------------------------------------------------------------------ the transport's own answers


async def _raw(app: Gateway, parts: list[bytes], *, stall: bool = False,
               headers: dict[str, str | None] | None = None) -> tuple[int, dict[str, Any]]:
    """Drive the ASGI app directly: the body in `parts`, then (stall) nothing more, ever.
    headers: added to the defaults, or (None) taken away."""
    sent: list[dict[str, Any]] = []
    queue = [{"type": "http.request", "body": p, "more_body": stall or i < len(parts) - 1}
             for i, p in enumerate(parts)]

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    h: dict[str, str | None] = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json",
                                "accept": "application/json", **(headers or {})}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": [(k.encode(), v.encode()) for k, v in h.items() if v is not None],
             "client": ("127.0.0.1", 1),
             "server": ("kbgate", 80)}
    await app(scope, receive, send)  # type: ignore[arg-type]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], orjson.loads(body)


async def test_a_stalled_body_is_408_and_a_missing_content_type_415(start: AppFactory) -> None:
    a = await start()
    a.app.runtime.config = replace(a.app.runtime.config,
                                   server=replace(a.app.runtime.config.server, body_timeout_seconds=0.2))
    status, body = await _raw(a.app, [b'{"jsonrpc":'], stall=True)
    assert status == 408 and body["error"]["data"]["code"] == "mcp.body_timeout"
    for content_type in (None, "text/json", "application/json; charset=latin-1"):
        status, body = await _raw(a.app, [b"{}"], headers={"content-type": content_type})
        assert status == 415 and body["error"]["data"]["code"] == "mcp.media_unsupported"
    assert [x["code"] for x in a.audit()] == ["mcp.body_timeout"] + ["mcp.media_unsupported"] * 3


async def test_a_bug_is_a_500_without_detail(start: AppFactory, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    a = await start()

    async def broken(*args: Any) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(a.app.mcp.manager, "handle_request", broken)
    status, body = await _raw(a.app, [orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})])
    assert status == 500 and body["error"] == {"code": -32603, "message": "internal error",
                                               "data": {"code": "internal", "retryable": False}}
    assert "secret detail" in caplog.text and a.audit()[-1]["code"] == "internal"


def test_a_request_that_bypassed_the_transport_has_no_caller() -> None:
    with pytest.raises(RuntimeError):
        call_of(SimpleNamespace(request=None))  # type: ignore[arg-type]


# ------------------------------------------------------------------ what a model never sees: our bugs


def _old_kb(a: App, docs: list[Document]) -> None:
    """Write `docs` into the 'kb' index as an older kbgate could (no publish_time rule)."""
    IndexStore(a.root / "indexes").create_or_open_for_write("kb").ingest(docs, progress=False)
    a.app.runtime.indexes.open("kb").maybe_reload(force=True)


async def test_fetch_never_fails_on_a_stored_publish_time(start: AppFactory) -> None:
    # The newcomer's F1: publish_time 1764580000000 (milliseconds) in an index made every fetch
    # of the document a JSON-RPC error "year 57887 is out of range", audited as passed.
    a = await start()
    _old_kb(a, [Document("ms", "毫秒文档", (Section("", "MSTIMEWORD 毫秒时间戳"),), publish_time=1_764_580_000_000),
                Document("big", "巨大文档", (Section("", "BIGTIMEWORD 溢出时间戳"),),
                         publish_time=9_000_000_000_000_000_000)])
    async with a.connect() as c:
        ms = payload(await c.call_tool("fetch", {"id": (await _search(c, "MSTIMEWORD", route="kbroute"))[0]["id"]}))
        big = payload(await c.call_tool("fetch", {"id": (await _search(c, "BIGTIMEWORD", route="kbroute"))[0]["id"]}))
    assert ms["metadata"]["publish_time"] == "2025-12-01T09:06:40Z"  # read as milliseconds, as ingest reads them
    assert big["metadata"]["document_id"] == "big" and "publish_time" not in big["metadata"]
    assert [x["outcome"] for x in a.audit() if x["tool"] == "mcp.fetch"] == ["passed", "passed"]


@pytest.mark.parametrize("tool", ["search", "fetch"])
async def test_a_bug_in_a_tool_is_a_tool_error_audited_and_counted(
        start: AppFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tool: str) -> None:
    a = await start()

    async def broken(*args: Any) -> None:
        raise OverflowError("secret detail: year 57887 is out of range")

    monkeypatch.setitem(_TOOLS, tool, broken)
    async with a.connect() as c:
        text = _error(await c.call_tool(tool, {"query": "密钥"} if tool == "search" else {"id": "x"}))
    assert text == INTERNAL_TEXT and "secret" not in text
    line = a.audit()[-1]
    assert (line["tool"], line["outcome"], line["status"], line["code"]) == (f"mcp.{tool}", "failed", 200, "internal")
    assert "secret detail" in caplog.text  # the trace stays in the log
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=a.app)) as http:
        metrics = (await http.get("http://kbgate/metrics")).text
    assert 'kbgate_wing_errors_total{code="internal",wing="mcp"} 1.0' in metrics
    assert 'kbgate_wing_requests_total{outcome="failed",wing="mcp"} 1.0' in metrics


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer  "])
async def test_the_bearer_scheme_is_read_in_any_case(start: AppFactory, scheme: str) -> None:
    # RFC 7235 §2.1: the scheme is case-insensitive; RFC 6750 §2.1: 1*SP before the token.
    a = await start()
    status, body = await _raw(a.app, [orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})],
                              headers={"authorization": f"{scheme} {TOKEN_ALICE}",
                                       "mcp-protocol-version": "2025-11-25"})
    assert status == 200 and {t["name"] for t in body["result"]["tools"]} == {"search", "fetch"}
    status, body = await _raw(a.app, [b"{}"], headers={"authorization": f"{scheme} {TOKEN_ALICE.upper()}"})
    assert status == 401 and body["error"]["data"]["code"] == "access.unauthorized"  # the token itself is exact


def test_document_urls_hold_no_dot_segments() -> None:
    assert document_url(None, "evil", "../../etc/passwd") == "kbgate://evil/%2E%2E/%2E%2E/etc/passwd"
    assert document_url(None, "r", "./a/./b/.../c..d/.x") == "kbgate://r/%2E/a/%2E/b/%2E%2E%2E/c..d/.x"
    assert document_url(None, "r", "a//b") == "kbgate://r/a//b"
