"""gateway/mcp/ end to end: the official SDK's own client (`mcp.client.streamable_http`) over
real HTTP to a real `kbgate serve` with 2 hypercorn workers and Redis, in both protocol
revisions the SDK serves (2025-11-25 with `initialize`, 2026-07-28 with `server/discover`).

One server for the module (started once: about 3 s); the restart test starts its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from gateway.mcp.transport import host_allowed, origin_allowed
from tests.ops.test_metrics import samples, val
from tests.support.configs import ENV, SECRETS, config, write
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import (
    REVISIONS,
    TOKEN_ALICE,
    TOKEN_BOB,
    TOKEN_CAROL,
    TOKEN_DAVE,
    TOP,
    connect,
    mcp_agent_section,
    payload,
)

pytestmark = pytest.mark.anyio
ORIGIN = "https://chat.example.com"
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _config(root: Path, indexes: Path, redis_url: str, port: int) -> Path:
    data = config(root, tenants=[], indexes=indexes, port=port, workers=2, redis_url=redis_url,
                  key_prefix=f"kbgate-mcp-{port}", agent=mcp_agent_section(),
                  audit={"sink": "file", "path": str(root / "audit.jsonl")},
                  mcp={"allowed_origins": [ORIGIN, "http://localhost:*"], "allowed_hosts": ["127.0.0.1:*"]})
    return write(root / "gateway.toml", data)


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("mcp")
    port = free_port()
    with serve(_config(root, docs_index, redis_url, port), port=port, workers=2, env=ENV) as s:
        yield s


def _audit(srv: Server, session: str, count: int) -> list[dict[str, Any]]:
    """The audit lines of calls made in agent session `session` (each test uses its own), once
    there are `count` of them: a line is written just after its answer left, by either
    worker, so a test may read before it lands and lines of two calls may land in either
    order. Sorted by tool, outcome and code."""
    path = srv.log_path.parent / "audit.jsonl"
    deadline = time.monotonic() + 10
    while True:
        lines = [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []
        mine = [a for a in lines if a["principal"] and a["principal"]["session"] == session]
        if len(mine) >= count or time.monotonic() > deadline:
            return sorted(mine, key=lambda a: (a["tool"], a["outcome"], a["code"] or ""))
        time.sleep(0.02)


def _rpc(method: str, params: dict[str, Any] | None = None, ident: int = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}})


def _post(srv: Server, path: str = "/mcp", token: str | None = TOKEN_ALICE, body: bytes | None = None,
          **headers: str) -> httpx.Response:
    h = {**JSON, **({"authorization": f"Bearer {token}"} if token else {}),
         "mcp-protocol-version": "2025-11-25", **{k.replace("_", "-"): v for k, v in headers.items()}}
    return httpx.post(srv.base + path, content=body if body is not None else _rpc("tools/list"), headers=h,
                      follow_redirects=False, timeout=10)


# ------------------------------------------------------------------ the tools, both revisions


@pytest.mark.parametrize(("mode", "version"), REVISIONS)
async def test_list_tools_per_grant(srv: Server, mode: str, version: str) -> None:
    async with connect(srv.base + "/mcp", TOKEN_ALICE, mode=mode) as c:
        assert c.protocol_version == version
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert sorted(tools) == ["fetch", "search"]
    search = tools["search"]
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema["properties"]["route"]["enum"] == ["support", "ops", "off"]  # several routes
    assert "如何轮换密钥" in (search.description or "") and search.annotations and search.annotations.read_only_hint
    assert tools["fetch"].input_schema["required"] == ["id"] and tools["fetch"].output_schema
    async with connect(srv.base + "/mcp", TOKEN_BOB, mode=mode) as c:  # one route: no route argument
        bob = {t.name: t for t in (await c.list_tools()).tools}
    assert sorted(bob) == ["fetch", "search"] and "route" not in bob["search"].input_schema["properties"]
    async with connect(srv.base + "/mcp", TOKEN_CAROL, mode=mode) as c:  # mcp.search only
        assert [t.name for t in (await c.list_tools()).tools] == ["search"]
    async with connect(srv.base + "/mcp", TOKEN_DAVE, mode=mode) as c:  # the knowledge protocol's grants only
        assert (await c.list_tools()).tools == []


@pytest.mark.parametrize(("mode", "version"), REVISIONS)
async def test_search_then_fetch(srv: Server, mode: str, version: str) -> None:
    async with connect(srv.base + "/mcp", TOKEN_ALICE, mode=mode) as c:
        assert c.protocol_version == version
        found = payload(await c.call_tool("search", {"query": "密钥轮换"}))
        assert found["results"] and all(set(r) == {"id", "title", "url", "text"} for r in found["results"])
        top = found["results"][0]
        assert top["title"] == "密钥轮换" and top["url"] == f"kbgate://support/{TOP}"
        assert len({r["url"] for r in found["results"]}) == len(found["results"])  # one result per document
        assert not any("config/" in r["url"] or "state/" in r["url"] or "hidden" in r["url"]
                       for r in found["results"])
        doc = payload(await c.call_tool("fetch", {"id": top["id"]}))
    assert doc["id"] == top["id"] and doc["title"] == "密钥轮换" and doc["url"] == top["url"]
    assert "新旧两把密钥可以同时生效" in doc["text"]
    assert doc["metadata"] | {"revision": "-"} == {"route": "support", "document_id": TOP, "path": TOP,
                                                   "dataset": "public", "revision": "-", "truncated": False}


async def test_an_id_works_on_every_worker_and_a_new_connection(srv: Server) -> None:
    async with connect(srv.base + "/mcp", TOKEN_ALICE) as c:
        ident = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["id"]
    for _ in range(6):  # fresh connections land on both workers; stateless: any of them answers
        async with connect(srv.base + "/mcp", TOKEN_ALICE, mode="auto") as c:
            assert TOP in payload(await c.call_tool("fetch", {"id": ident}))["metadata"]["document_id"]
    assert "mcp-session-id" not in _post(srv).headers


async def test_a_tampered_or_another_clients_id_is_refused(srv: Server) -> None:
    tag = {"x-agent-session": "tampered"}
    async with connect(srv.base + "/mcp", TOKEN_BOB, headers=tag) as c:
        bobs = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["id"]
        assert payload(await c.call_tool("fetch", {"id": bobs}))["text"]
    async with connect(srv.base + "/mcp", TOKEN_ALICE, headers=tag) as c:
        ident = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["id"]
        for bad in (bobs, ident[:-4] + ("AAAA" if not ident.endswith("AAAA") else "BBBB"), "guide/key-rotation.md"):
            refused = await c.call_tool("fetch", {"id": bad})
            assert refused.is_error and "not valid" in refused.content[0].text  # type: ignore[union-attr]
            assert "新旧两把密钥" not in str(refused.content)
    async with connect(srv.base + "/mcp", TOKEN_ALICE, headers={"x-agent-session": "elsewhere"}) as c:
        refused = await c.call_tool("fetch", {"id": ident})  # the same client in another session
        assert refused.is_error and "not valid" in refused.content[0].text  # type: ignore[union-attr]
    failed = [a for a in _audit(srv, "tampered", 6) if a["outcome"] == "failed"]
    assert [(a["principal"]["id"], a["tool"], a["code"]) for a in failed] == [
        ("alice", "mcp.fetch", "knowledge_reference_invalid")] * 3
    assert [a["code"] for a in _audit(srv, "elsewhere", 1)] == ["knowledge_reference_invalid"]


# ------------------------------------------------------------------ grants and auth


async def test_a_client_without_the_grant_cannot_call_the_tool(srv: Server) -> None:
    async with connect(srv.base + "/mcp", TOKEN_CAROL, headers={"x-agent-session": "no-grant"}) as c:
        ident = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["id"]
        with pytest.raises(MCPError) as err:
            await c.call_tool("fetch", {"id": ident})
    assert err.value.code == -32602 and "Unknown tool" in err.value.message
    lines = _audit(srv, "no-grant", 2)
    assert [(a["principal"]["id"], a["tool"], a["outcome"], a["code"]) for a in lines] == [
        ("carol", "mcp.fetch", "denied", "access.forbidden_tool"), ("carol", "mcp.search", "passed", None)]


@pytest.mark.parametrize(("authorization", "said"), [("Basic YWxpY2U6eA==", None), ("Bearer", None),
                                                     ("Bearer nope", "a Bearer token is required")])
def test_a_challenge_names_an_error_only_for_a_bearer_token_and_in_the_bodys_words(
        srv: Server, authorization: str, said: str | None) -> None:
    r = _post(srv, token=None, authorization=authorization)
    assert r.status_code == 401 and r.json()["error"]["message"] == "a Bearer token is required"
    challenge = r.headers["www-authenticate"]
    assert ("error=" in challenge) == (said is not None)
    assert said is None or f'error="invalid_token", error_description="{said}"' in challenge


@pytest.mark.parametrize("token", [None, "not-a-valid-token-0123456789"])
async def test_no_or_a_wrong_token_is_401_before_the_sdk(srv: Server, token: str | None) -> None:
    r = _post(srv, token=token)
    assert r.status_code == 401 and r.json()["error"]["data"]["code"] == "access.unauthorized"
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="kbgate"') and ("invalid_token" in challenge) == (token is not None)
    # The SDK's client gives up on the 401 too, with our JSON-RPC error (raised out of its task groups).
    said = "the Bearer token is not valid" if token is not None else "a Bearer token is required"
    assert (f'error_description="{said}"' in challenge) == (token is not None)  # the body's reason
    refused = pytest.RaisesExc(MCPError, check=lambda e: (e.code, e.message, e.data) == (
        -32600, said, {"code": "access.unauthorized", "retryable": False}))
    with pytest.RaisesGroup(refused, flatten_subgroups=True):
        async with connect(srv.base + "/mcp", token) as c:
            await c.list_tools()


# ------------------------------------------------------------------ HTTP


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_both_paths_answer_without_a_redirect(srv: Server, path: str) -> None:
    r = _post(srv, path)
    assert r.status_code == 200 and "location" not in r.headers, (r.status_code, r.text)
    assert r.headers["cache-control"] == "no-store" and r.headers["x-request-id"]
    assert r.headers["content-type"].startswith("application/json")
    async with connect(srv.base + path, TOKEN_ALICE, mode="auto") as c:
        assert [t.name for t in (await c.list_tools()).tools] == ["search", "fetch"]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_get_and_delete_are_405(srv: Server, method: str) -> None:
    for path in ("/mcp", "/mcp/"):
        r = httpx.request(method, srv.base + path, headers={"authorization": f"Bearer {TOKEN_ALICE}",
                                                            "accept": "text/event-stream"}, timeout=5)
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert r.json()["error"]["data"]["code"] == "mcp.method_not_allowed"


def test_origin_is_checked_against_the_allow_list(srv: Server) -> None:
    bad = _post(srv, origin="https://evil.example.com")
    assert bad.status_code == 403 and bad.json()["error"]["data"]["code"] == "mcp.origin_forbidden"
    assert "access-control-allow-origin" not in bad.headers
    assert _post(srv, token=None, origin="https://evil.example.com").status_code == 403  # before the token
    good = _post(srv, origin=ORIGIN)
    assert good.status_code == 200 and good.headers["access-control-allow-origin"] == ORIGIN
    assert _post(srv, origin="http://localhost:6274").status_code == 200  # 'http://localhost:*'
    assert _post(srv).status_code == 200  # no Origin: not a browser
    pre = httpx.options(srv.base + "/mcp", headers={"origin": ORIGIN, "access-control-request-method": "POST",
                                                    "access-control-request-headers": "authorization, content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == ORIGIN
    assert pre.headers["access-control-allow-methods"] == "POST" and "content-length" not in pre.headers
    assert pre.headers["access-control-allow-headers"] == "authorization, content-type"


@pytest.mark.parametrize(("origin", "allowed"), [
    ("https://chat.example.com", True), ("http://localhost:6274", True), ("http://localhost:80", True),
    ("http://localhost", False), ("http://localhost.evil.com:80", False), ("http://localhost:80x", False),
    ("https://chat.example.com:443", False), ("https://chat.example.com.evil.com", False), ("null", False),
])
def test_origin_patterns(origin: str, allowed: bool) -> None:
    assert origin_allowed(origin, (ORIGIN, "http://localhost:*")) is allowed


@pytest.mark.parametrize(("host", "scheme", "allowed"), [
    ("kb.example.com", "http", True), ("KB.EXAMPLE.COM", "https", True), ("kb.example.com.", "http", True),
    ("kb.example.com:80", "http", True), ("kb.example.com:443", "https", True), ("kb.example.com:443", "http", False),
    ("kb.example.com:8443", "https", False), ("evil.com", "http", False), (None, "http", False), ("", "http", False),
    ("kb.example.com:*", "http", False), ("api.example.com", "https", True), ("api.example.com:443", "https", True),
    ("api.example.com", "http", False), ("[::1]:8443", "http", True), ("[0:0:0:0:0:0:0:1]:8443", "http", True),
    ("[::1]", "http", False), ("[::2]:8443", "http", False), ("[zz::1]:8443", "http", False),
    ("127.0.0.1:5", "http", True), ("127.0.0.1", "http", True), ("127.0.0.2:5", "http", False),
])
def test_host_patterns(host: str | None, scheme: str, allowed: bool) -> None:
    entries = ("kb.example.com", "API.example.com:443", "[::1]:8443", "127.0.0.1:*")
    assert host_allowed(host, entries, scheme) is allowed


def test_host_is_checked_when_hosts_are_listed(srv: Server) -> None:
    refused = _post(srv, host="kb.evil.example", x_agent_session="host")
    assert refused.status_code == 421 and refused.headers["content-type"] == "application/json"
    assert refused.json()["error"]["data"]["code"] == "mcp.host_misdirected"
    assert _post(srv, host=f"127.0.0.1:{srv.port}", x_agent_session="host").status_code == 200  # tools/list
    assert [(a["code"], a["status"]) for a in _audit(srv, "host", 1)] == [("mcp.host_misdirected", 421)]


def test_body_bounds_and_media_type(srv: Server) -> None:
    big = _post(srv, body=_rpc("tools/call", {"name": "search", "arguments": {"query": "密" * 30000}}))
    assert big.status_code == 413 and big.json()["error"]["data"]["code"] == "mcp.body_too_large"
    plain = _post(srv, content_type="text/plain")
    assert plain.status_code == 415 and plain.json()["error"]["data"]["code"] == "mcp.media_unsupported"
    broken = _post(srv, body=b"{not json")
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700  # the SDK's parse error


@pytest.mark.parametrize("ident", [{"a": 1}, [1], True, 1.5])
def test_an_id_that_is_not_a_string_or_integer_is_invalid_request(srv: Server, ident: Any) -> None:
    # An object id got a 202 with an empty body from the SDK.
    r = _post(srv, body=orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/list", "params": {}}))
    assert r.status_code == 400 and r.headers["content-type"] == "application/json", r.text
    body = r.json()
    assert body["id"] is None and body["error"]["code"] == -32600
    assert body["error"]["data"]["code"] == "mcp.request_id_invalid"


def test_a_request_with_a_null_id_is_invalid_request(srv: Server) -> None:
    r = _post(srv, body=orjson.dumps({"jsonrpc": "2.0", "id": None, "method": "tools/list", "params": {}}))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600 and r.json()["id"] is None


def test_a_batch_is_refused_in_the_json_rpc_envelope(srv: Server) -> None:
    # It was answered with pydantic's raw text ("4 validation errors for union[...]").
    batch = b"[" + _rpc("tools/list", ident=1) + b"," + _rpc("tools/list", ident=2) + b"]"
    for body in (batch, b"[]"):
        r = _post(srv, body=body)
        assert r.status_code == 400 and r.headers["content-type"] == "application/json", r.text
        out = r.json()
        assert out == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "batch requests are not supported",
            "data": {"code": "mcp.batch_unsupported", "retryable": False}}}
        assert "validation error" not in r.text


@pytest.mark.parametrize(("message", "problem"), [
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}, "params must be an object"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, "x"]}, "params must be an object"),
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, 'jsonrpc must be "2.0"'),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method must be a string"),
    ({"jsonrpc": "2.0", "id": 1}, "not a JSON-RPC request, notification, response or error"),
    ("tools/list", "a JSON-RPC message must be an object"),
])
def test_a_message_that_is_not_json_rpc_gets_a_one_line_invalid_request(srv: Server, message: Any,
                                                                         problem: str) -> None:
    # params "x" was answered with pydantic's text: ~1 KB, 4 validation errors, URLs, the input echoed.
    r = _post(srv, body=orjson.dumps(message))
    assert r.status_code == 400 and r.headers["content-type"] == "application/json", r.text
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"Invalid Request: {problem}",
        "data": {"code": "mcp.request_invalid", "retryable": False}}}
    assert "pydantic" not in r.text and "validation error" not in r.text and len(r.content) < 200


def test_string_and_integer_ids_still_reach_the_sdk(srv: Server) -> None:
    for ident in ("req-1", 7):
        r = _post(srv, body=orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/list", "params": {}}))
        assert r.status_code == 200 and r.json()["id"] == ident, r.text


# ------------------------------------------------------------------ audit and metrics


async def test_every_tool_call_is_audited_and_counted_per_wing(srv: Server) -> None:
    m0 = samples(httpx.get(srv.base + "/metrics", timeout=10).text)
    async with connect(srv.base + "/mcp", TOKEN_BOB, headers={"x-agent-session": "audited"}) as c:
        await c.list_tools()
        ident = payload(await c.call_tool("search", {"query": "重放攻击"}))["results"][0]["id"]
        payload(await c.call_tool("fetch", {"id": ident}))
        bad = await c.call_tool("search", {"query": "   "})
    assert bad.is_error and "query" in bad.content[0].text  # type: ignore[union-attr]
    lines = _audit(srv, "audited", 3)  # tools/list is not a tool call: counted, not audited
    assert [(a["wing"], a["tool"], a["outcome"], a["code"], a["route"]) for a in lines] == [
        ("mcp", "mcp.fetch", "passed", None, "support"),
        ("mcp", "mcp.search", "failed", "mcp.arguments_invalid", ""),  # refused before a route was resolved
        ("mcp", "mcp.search", "passed", None, "support")]
    assert all(a["principal"]["id"] == "bob" and a["status"] == 200 and a["duration_ms"] > 0 for a in lines)
    assert lines[2]["scope"]["routes"][0]["index"] == "docs" and lines[2]["results"] >= 1
    text = str(lines)
    assert "重放攻击" not in text and not any(s in text for s in SECRETS)  # no query, no secret
    m = samples(httpx.get(srv.base + "/metrics", timeout=10).text)  # both workers, summed

    def grew(name: str, **labels: str) -> float:
        return val(m, name, **labels) - val(m0, name, **labels)

    # initialize, notifications/initialized, tools/list, search, fetch passed; the bad search failed
    assert grew("kbgate_wing_requests_total", wing="mcp", outcome="passed") >= 5
    assert grew("kbgate_wing_requests_total", wing="mcp", outcome="failed") == 1
    assert grew("kbgate_wing_errors_total", wing="mcp", code="mcp.arguments_invalid") == 1
    assert grew("kbgate_wing_duration_seconds_count", wing="mcp") >= 6


# ------------------------------------------------------------------ restarts


async def test_an_id_survives_a_restart(tmp_path: Path, docs_index: Path, redis_url: str) -> None:
    port = free_port()
    cfg = _config(tmp_path, docs_index, redis_url, port)
    with serve(cfg, port=port, workers=1, env=ENV) as first:  # the module's server shows 2 workers
        async with connect(first.base + "/mcp", TOKEN_ALICE) as c:
            ident = payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["id"]
    with serve(cfg, port=port, workers=1, env=ENV) as second:
        async with connect(second.base + "/mcp", TOKEN_ALICE, mode="auto") as c:
            assert payload(await c.call_tool("fetch", {"id": ident}))["metadata"]["document_id"] == TOP
