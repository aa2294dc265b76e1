"""gateway/agent/tools/ (the tool API) through the ASGI app: a real Tantivy index, a real Redis, the
SQLite tracker, the shared scope engine. One test per row of Agent Access API 技术设计 §14's table
(fixtures in tests/fixtures/access), every denial audited, a schema contract test per
tool, and parallel writes that must file exactly once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.agent import upstream_answer as answer
from gateway.agent.idempotency import canonical_dedupe_key
from gateway.core.clock import FixedClock
from gateway.core.errors import ToolError
from gateway.core.replay import RedisNonceStore
from gateway.serve.app import Gateway, create_app
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.agent_env import access_validator
from tests.support.configs import REF_KEY, client, config, parse
from tests.support.documents import SECRET_TEXT
from tests.support.paths import FIXTURES as ALL_FIXTURES

NOW = 1_800_000_000
FIXTURES = ALL_FIXTURES / "access"
TOKENS = {"alice": "alice-access-token-AAAAAAAAAAAA", "bob": "bob-access-token-BBBBBBBBBBBBBB",
          "carol": "carol-access-token-CCCCCCCCCCCC"}
ALL_TOOLS = ["search", "ask", "get_page", "get_page.full_text", "get_context", "create_feedback",
             "create_improvement_task"]
READ_TOOLS = ["search", "ask", "get_page", "get_context", "create_feedback", "create_improvement_task"]


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text("utf-8"))
    return data


def config_data(root: Path, indexes: Path, redis_url: str, key_prefix: str) -> dict[str, Any]:
    """The tool API's setting: routes support, ops, off, gone; alice (every tool, working docs),
    bob (public, read tools), carol (search only); audit and feedback under `root`."""
    return config(
        root, tenants=[], indexes=indexes, redis_url=redis_url, key_prefix=key_prefix,
        agent={
            "ref_key_env": "KBGATE_REF_KEY",
            "routes": {"support": {"index": "docs"}, "ops": {"index": "docs", "path_globs": ["ops/**"]},
                       "off": {"index": "docs", "enabled": False}, "gone": {"index": "absent"}},
            "clients": {
                "alice": client("alice-1", TOKENS["alice"], ["support", "ops", "off", "gone"], ALL_TOOLS,
                                datasets=["*"], path_globs=["**"], include_working_docs=True),
                "bob": client("bob-1", TOKENS["bob"], ["support"], READ_TOOLS, datasets=["public"],
                              path_globs=["guide/**", "ops/**", "long/**"]),
                "carol": client("carol-1", TOKENS["carol"], ["support"], ["search"], datasets=["*"], path_globs=["**"]),
            },
        },
        audit={"sink": "file", "path": str(root / "audit.jsonl")},
        access={"sqlite_path": str(root / "feedback.sqlite3"), "page_max_bytes": 4096, "context_max_pages": 3,
                "context_max_bytes_per_page": 300, "context_max_total_bytes": 600},
    )


@dataclass
class Env:
    app: Gateway
    http: httpx.AsyncClient
    root: Path
    index_opens: list[str]

    def audit_lines(self) -> list[dict[str, Any]]:
        p = self.root / "audit.jsonl"
        return [orjson.loads(x) for x in p.read_bytes().splitlines()] if p.exists() else []

    async def call(self, tool: str, body: dict[str, Any], who: str | None = "bob",
                   headers: dict[str, str] | None = None) -> httpx.Response:
        h = {"content-type": "application/json", **(headers or {})}
        if who is not None:
            h["authorization"] = f"Bearer {TOKENS[who]}"
        return await self.http.post(f"/agent-access/v1/tools/{tool}", content=orjson.dumps(body), headers=h)


@pytest.fixture(name="env")
async def _env(docs_index: Path, tmp_path: Path, redis_url: str, key_prefix: str) -> AsyncIterator[Env]:
    cfg = parse(config_data(tmp_path, docs_index, redis_url, key_prefix), tmp_path, {"KBGATE_REF_KEY": REF_KEY})
    clock = FixedClock(float(NOW))
    app = create_app(cfg, clock=clock, nonces=RedisNonceStore(redis_url, 1.0, clock))
    opens: list[str] = []
    real_index = app.runtime.index

    def counting_index(name: str):  # type: ignore[no-untyped-def]
        opens.append(name)
        return real_index(name)

    app.runtime.index = counting_index  # type: ignore[method-assign]
    async with LifespanManager(app) as manager:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate") as c:
            yield Env(app, c, tmp_path, opens)


RESULT = access_validator("AgentToolResult")
REQUEST = access_validator("AgentToolRequest")


def result(r: httpx.Response, http: int, status: str) -> dict[str, Any]:
    """A tool answer: HTTP status, AgentToolResult schema, no-store, nothing secret in it."""
    assert r.status_code == http, (r.status_code, r.text)
    assert r.headers["cache-control"] == "no-store"
    body: dict[str, Any] = orjson.loads(r.content)
    RESULT.validate(body)
    assert body["status"] == status, body
    for leak in (*TOKENS.values(), REF_KEY, SECRET_TEXT, "Traceback", "/tmp"):
        assert leak not in r.text, leak
    return body


def codes(body: dict[str, Any]) -> list[str]:
    return [e["code"] for e in body["errors"]]


def req(input: dict[str, Any], **over: Any) -> dict[str, Any]:
    body = {"caller": {"type": "agent"}, "input": input, **over}
    REQUEST.validate(body)
    return body


def doc_ids(body: dict[str, Any]) -> list[str]:
    return [x["citation"]["docId"] for x in body["data"]["results"]]


# ================================================================ Agent Access API 技术设计 §14, one test per row


@pytest.mark.anyio
async def test_row_forbidden_scope_never_calls_downstream(env: Env) -> None:
    fx = fixture("forbidden-scope.json")
    r = await env.call(fx["tool"], fx["request"], fx["token"])
    body = result(r, fx["expect"]["http"], fx["expect"]["status"])
    assert codes(body) == [fx["expect"]["code"]]
    assert env.index_opens == []  # the index was never opened
    r2 = await env.call("search", req({"query": "密钥"}, scope={"paths": ["secret/**"]}))
    assert codes(result(r2, 403, "denied")) == ["access.forbidden_scope"]
    r3 = await env.call("search", req({"query": "密钥"}, scope={"routes": ["ops-not-mine"]}))
    assert codes(result(r3, 403, "denied")) == ["access.forbidden_scope"]
    assert env.index_opens == []
    lines = env.audit_lines()
    assert [x["outcome"] for x in lines] == ["denied"] * 3
    assert {x["code"] for x in lines} == {"access.forbidden_scope"}


@pytest.mark.anyio
async def test_row_feedback_dedupe(env: Env) -> None:
    fx = fixture("feedback-dedupe.json")
    key = canonical_dedupe_key(fx["tool"], fx["input"])
    first = result(await env.call(fx["tool"], req(fx["input"], dedupeKey=key, idempotencyKey="alice-fb-0001"),
                                  "alice"), 200, "passed")
    second = result(await env.call(fx["tool"], req(fx["input"], dedupeKey=key, idempotencyKey="bob-fb-0001"),
                                   "bob"), 200, "passed")
    assert (first["data"]["deduped"], first["data"]["count"]) == (False, 1) and first["errors"] == []
    assert (second["data"]["deduped"], second["data"]["count"]) == (True, 2)
    assert second["data"]["recordId"] == first["data"]["recordId"]
    assert second["errors"][0]["code"] == fx["expect"]["second"]["info"]
    assert second["errors"][0]["severity"] == "info"
    with sqlite3.connect(env.root / "feedback.sqlite3") as db:
        assert db.execute("SELECT count(*), max(count) FROM records").fetchone() == (1, 2)


@pytest.mark.anyio
async def test_row_no_answer_ask(env: Env) -> None:
    fx = fixture("no-answer.json")
    body = result(await env.call(fx["tool"], fx["request"], fx["token"]), 200, "passed")
    data = body["data"]
    assert data["answer"] is None and data["noAnswerReason"] == fx["expect"]["noAnswerReason"]
    assert {a["type"] for a in data["actions"]} >= {"create_feedback", "create_improvement_task"}
    assert body["errors"] == [{"code": "answer.no_answer", "message": body["errors"][0]["message"],
                               "retryable": False, "severity": "info"}]
    strict = dict(fx["request"], input={**fx["request"]["input"], "strict": True})
    failed = result(await env.call("ask", strict, "bob"), 200, "failed")
    assert codes(failed) == ["answer.no_answer"] and failed["data"] is None


@pytest.mark.anyio
async def test_row_citation_result(env: Env) -> None:
    fx = fixture("search-result-citation.json")
    body = result(await env.call(fx["tool"], fx["request"], fx["token"]), 200, "passed")
    ids = doc_ids(body)
    assert "guide/key-rotation.md" in ids
    assert set(ids) <= set(fx["expect"]["allowed_doc_ids"])
    assert not set(ids) & set(fx["expect"]["never_doc_ids"])
    for item in body["data"]["results"]:
        c = item["citation"]
        assert c["route"] == "support" and c["dataset"] == "public" and c["revision"]
    ctx = result(await env.call("get_context", req({"question": "密钥轮换"}), "bob"), 200, "passed")
    cids = [p["citation"]["docId"] for p in ctx["data"]["pages"]]
    assert cids and set(cids) <= set(fx["expect"]["allowed_doc_ids"])


@pytest.mark.anyio
async def test_row_idempotency_conflict(env: Env) -> None:
    fx = fixture("idempotency-conflict.json")
    k1, k2 = (canonical_dedupe_key(fx["tool"], fx[x]) for x in ("first", "second"))
    ok = result(await env.call(fx["tool"], req(fx["first"], dedupeKey=k1, idempotencyKey=fx["idempotencyKey"]),
                               "alice"), 200, "passed")
    again = result(await env.call(fx["tool"], req(fx["first"], dedupeKey=k1, idempotencyKey=fx["idempotencyKey"]),
                                  "alice"), 200, "passed")
    assert again["data"] == ok["data"]  # same key + same payload → same result
    r = await env.call(fx["tool"], req(fx["second"], dedupeKey=k2, idempotencyKey=fx["idempotencyKey"]), "alice")
    body = result(r, fx["expect"]["http"], fx["expect"]["status"])
    assert codes(body) == [fx["expect"]["code"]]
    # the key includes the caller: bob's equal key is his own
    other = await env.call(fx["tool"], req(fx["second"], dedupeKey=k2, idempotencyKey=fx["idempotencyKey"]), "bob")
    assert result(other, 200, "passed")["data"]["count"] == 1
    with sqlite3.connect(env.root / "feedback.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (2,)


@pytest.mark.anyio
async def test_row_unauthorized_working_docs(env: Env) -> None:
    fx = fixture("working-docs.json")
    body = result(await env.call(fx["tool"], fx["request"], fx["token"]), 403, "denied")
    assert codes(body) == [fx["expect"]["code"]]
    assert env.audit_lines()[-1]["outcome"] == "denied" and env.audit_lines()[-1]["include_working_docs"]
    # alice's policy opts in, but without the request opting in she still does not see them
    plain = result(await env.call("search", req({"query": "密钥轮换草稿", "limit": 50}), "alice"), 200, "partial")
    assert "working/draft.md" not in doc_ids(plain)
    # a working-doc path without opting in is outside the scope
    page = await env.call("get_page", req({"path": "working/draft.md"}, scope={"routes": ["support"]}), "alice")
    assert codes(result(page, 403, "denied")) == ["access.forbidden_scope"]


@pytest.mark.anyio
async def test_working_docs_visible_when_request_and_policy_opt_in(env: Env) -> None:
    opted = await env.call("search", req({"query": "密钥轮换草稿", "limit": 50},
                                         scope={"routes": ["support"], "includeWorkingDocs": True}), "alice")
    body = result(opted, 200, "passed")
    assert "working/draft.md" in doc_ids(body)
    assert body["scope"]["includeWorkingDocs"] is True


# ================================================================ identity and policy


@pytest.mark.anyio
@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer not-a-known-token-000000"},
                                     {"authorization": "Basic Ym9iOmJvYg=="}])
async def test_unauthorized_is_401_and_audited(env: Env, headers: dict[str, str]) -> None:
    body = result(await env.call("search", req({"query": "密钥"}), None, headers), 401, "denied")
    assert codes(body) == ["access.unauthorized"] and body["scope"] is None
    line = env.audit_lines()[-1]
    assert line["outcome"] == "denied" and line["code"] == "access.unauthorized" and line["principal"] is None
    assert env.index_opens == []


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["bearer", "BEARER"])
async def test_the_bearer_scheme_is_read_in_any_case(env: Env, scheme: str) -> None:
    # RFC 7235 §2.1: "bearer <token>" was 401 "a Bearer token is required".
    body = result(await env.call("search", req({"query": "密钥"}), None,
                                 {"authorization": f"{scheme} {TOKENS['bob']}"}), 200, "passed")
    assert body["data"]["results"] and env.audit_lines()[-1]["principal"]["id"] == "bob"


@pytest.mark.anyio
async def test_identity_comes_from_the_token_not_the_body(env: Env) -> None:
    r = await env.call("search", req({"query": "密钥"}, caller={"type": "agent", "id": "alice"}), "bob")
    assert codes(result(r, 401, "denied")) == ["access.unauthorized"]
    r2 = await env.call("search", req({"query": "密钥"}, caller={"type": "agent", "id": "bob"}), "bob")
    result(r2, 200, "passed")
    assert env.audit_lines()[-1]["principal"]["id"] == "bob"


@pytest.mark.anyio
async def test_caller_type_must_be_agent_or_system(env: Env) -> None:
    r = await env.call("search", {"caller": {"type": "human"}, "input": {"query": "密钥"}}, "bob")
    assert codes(result(r, 400, "failed")) == ["access.request_invalid"]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "body", "fill"), [
    ("search", {"input": {"query": "密钥"}}, "密钥"),  # the natural first try: no caller
    ("ask", {"caller": {"type": "agent"}, "question": "密钥轮换"}, "密钥轮换"),  # no input
    ("get_page", {"caller": "agent", "input": {"path": "guide/keys.md"}}, "guide/keys.md"),
])
async def test_a_request_without_caller_or_input_is_shown_a_minimal_one_that_works(
        env: Env, tool: str, body: dict[str, Any], fill: str) -> None:
    [error] = result(await env.call(tool, body, "alice"), 400, "failed")["errors"]
    assert error["code"] == "access.request_invalid"
    assert "a minimal request: " in error["message"], error
    shown = error["message"].split("a minimal request: ", 1)[1]
    r = await env.call(tool, orjson.loads(shown.replace("…", fill)), "alice")
    assert r.status_code != 400, r.text  # the request the message shows is read as valid


@pytest.mark.anyio
async def test_forbidden_tool_is_403_and_audited_denied(env: Env) -> None:
    body = result(await env.call("ask", req({"question": "密钥轮换"}), "carol"), 403, "denied")
    assert codes(body) == ["access.forbidden_tool"]
    assert env.audit_lines()[-1]["outcome"] == "denied" and env.audit_lines()[-1]["tool"] == "access.ask"
    assert env.index_opens == []


@pytest.mark.anyio
async def test_dataset_not_allowed(env: Env) -> None:
    body = result(await env.call("search", req({"query": "随机串"}, scope={"datasets": ["internal"]})), 403, "denied")
    assert codes(body) == ["access.dataset_not_allowed"]
    assert env.audit_lines()[-1]["outcome"] == "denied"


@pytest.mark.anyio
async def test_unknown_tool(env: Env) -> None:
    body = result(await env.call("delete_page", req({})), 404, "failed")
    assert codes(body) == ["access.tool_unknown"]


@pytest.mark.anyio
async def test_effective_scope_is_request_intersect_policy(env: Env) -> None:
    body = result(await env.call("search", req({"query": "密钥", "limit": 50}, scope={"paths": ["guide/**"]})),
                  200, "passed")
    assert body["scope"]["routes"] == [{"route": "support", "datasets": ["public"], "paths": ["guide/**"]}]
    assert "config/**" in body["scope"]["excludedPaths"] and "working/**" in body["scope"]["excludedPaths"]
    assert all(i.startswith("guide/") for i in doc_ids(body))


@pytest.mark.anyio
async def test_config_is_never_readable_even_with_everything_allowed(env: Env) -> None:
    r = await env.call("get_page", req({"path": "config/secrets.md", "fullText": True}), "alice")
    assert codes(result(r, 403, "denied")) == ["access.forbidden_scope"]
    by_id = await env.call("get_page", req({"documentId": "config/secrets.md"}), "alice")
    assert codes(result(by_id, 403, "denied")) == ["access.forbidden_scope"]  # decided on the id, as on a path
    found = result(await env.call("search", req({"query": "密钥轮换口令", "limit": 50}), "alice"), 200, "partial")
    assert "config/secrets.md" not in doc_ids(found) and "state/manifest.md" not in doc_ids(found)


# ================================================================ partial, pages, context


@pytest.mark.anyio
async def test_partial_index_is_200_with_warnings(env: Env) -> None:
    body = result(await env.call("search", req({"query": "密钥轮换"}), "alice"), 200, "partial")
    assert body["data"]["results"]
    warned = body["errors"]
    assert {w["code"] for w in warned} == {"access.tool_failed"} and all(w["severity"] == "warning" for w in warned)
    assert any(w["retryable"] for w in warned)  # the absent index
    assert env.audit_lines()[-1]["outcome"] == "partial"


@pytest.mark.anyio
async def test_all_indexes_down_is_failed_retryable(env: Env) -> None:
    body = result(await env.call("search", req({"query": "密钥"}, scope={"routes": ["gone"]}), "alice"), 502, "failed")
    assert codes(body) == ["access.tool_failed"] and body["errors"][0]["retryable"]


@pytest.mark.anyio
async def test_get_page_default_is_summary_front_matter_citation(env: Env) -> None:
    body = result(await env.call("get_page", req({"path": "guide/key-rotation.md"})), 200, "passed")
    d = body["data"]
    assert "text" not in d and d["summary"] and d["limits"]["fullText"] is False
    assert d["frontMatter"]["path"] == "guide/key-rotation.md" and d["citation"]["docId"] == "guide/key-rotation.md"
    by_id = result(await env.call("get_page", req({"documentId": "guide/key-rotation.md"})), 200, "passed")
    assert by_id["data"]["citation"] == d["citation"]


@pytest.mark.anyio
async def test_get_page_gives_a_stored_millisecond_publish_time_in_seconds(
        private_index: Path, tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    # An index built before indexes.publish_time may hold milliseconds (1764580000000 was
    # answered as publishTime unchanged); a value no time has is left out.
    IndexStore(private_index).create_or_open_for_write("docs").ingest([
        Document("guide/ms.md", "毫秒", (Section("", "毫秒时间戳"),), path="guide/ms.md", dataset="public",
                 publish_time=1_764_580_000_000),
        Document("guide/big.md", "巨大", (Section("", "溢出时间戳"),), path="guide/big.md", dataset="public",
                 publish_time=9_000_000_000_000_000_000)], progress=False)
    cfg = parse(config_data(tmp_path, private_index, redis_url, key_prefix), tmp_path, {"KBGATE_REF_KEY": REF_KEY})
    clock = FixedClock(float(NOW))
    app = create_app(cfg, clock=clock, nonces=RedisNonceStore(redis_url, 1.0, clock))
    async with LifespanManager(app) as manager:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate") as c:
            env = Env(app, c, tmp_path, [])
            ms = result(await env.call("get_page", req({"path": "guide/ms.md"})), 200, "passed")
            big = result(await env.call("get_page", req({"path": "guide/big.md"})), 200, "passed")
    assert ms["data"]["frontMatter"]["publishTime"] == 1_764_580_000
    assert "publishTime" not in big["data"]["frontMatter"]


@pytest.mark.anyio
async def test_get_page_full_text_needs_policy(env: Env) -> None:
    r = await env.call("get_page", req({"path": "guide/key-rotation.md", "fullText": True}), "bob")
    assert codes(result(r, 403, "denied")) == ["access.forbidden_tool"]
    ok = result(await env.call("get_page", req({"path": "long/manual.md", "fullText": True, "maxBytes": 1000}),
                               "alice"), 200, "passed")
    assert ok["data"]["truncated"] and len(ok["data"]["text"].encode("utf-8")) <= 1000
    assert ok["data"]["text"].startswith("第0节")


@pytest.mark.anyio
async def test_get_page_hidden_or_other_dataset_is_not_found(env: Env) -> None:
    for doc in ("guide/hidden.md", "guide/replay.md", "no/such.md"):
        r = await env.call("get_page", req({"documentId": doc}))
        assert codes(result(r, 404, "failed")) == ["access.page_not_found"], doc


@pytest.mark.anyio
async def test_get_context_pack_has_effective_scope_and_limits(env: Env) -> None:
    body = result(await env.call("get_context", req({"question": "密钥", "limit": 20},
                                                    scope={"paths": ["guide/**", "ops/**", "long/**"]})),
                  200, "passed")
    pack = body["data"]
    assert pack["limits"] == {"maxPages": 3, "maxBytesPerPage": 300, "maxTotalBytes": 600}
    assert len(pack["pages"]) <= 3
    assert sum(len(p["excerpt"].encode()) for p in pack["pages"]) <= 600
    assert all(len(p["excerpt"].encode()) <= 300 for p in pack["pages"])
    assert pack["scope"] == body["scope"]
    assert pack["scope"]["routes"][0]["datasets"] == ["public"]  # policy, not the (absent) request
    line = env.audit_lines()[-1]
    assert line["pages"] == len(pack["pages"]) and line["context_bytes"] <= 600
    by_path = result(await env.call("get_context", req({"paths": ["long/manual.md", "guide/key-rotation.md"]})),
                     200, "passed")
    assert by_path["data"]["strategy"] == "paths" and by_path["data"]["truncated"]


@pytest.mark.anyio
async def test_get_context_by_paths_returns_the_readable_pages_and_names_each_unreadable_path(env: Env) -> None:
    """Agent Access API 技术设计 §12 partial: one unreadable path (outside the policy, never readable, absent)
    does not fail the call; each is a warning naming its path, the readable pages come back."""
    paths = ["guide/key-rotation.md", "config/secrets.md", "guide/no-such.md"]
    body = result(await env.call("get_context", req({"paths": paths})), 200, "partial")
    assert [p["docId"] for p in body["data"]["pages"]] == ["guide/key-rotation.md"]
    warned = {(e["code"], e["severity"]) for e in body["errors"]}
    assert warned == {("access.forbidden_scope", "warning"), ("access.page_not_found", "warning")}
    messages = " ".join(e["message"] for e in body["errors"])
    assert "config/secrets.md" in messages and "guide/no-such.md" in messages and SECRET_TEXT not in str(body)
    assert env.audit_lines()[-1]["outcome"] == "partial"


@pytest.mark.anyio
async def test_get_context_with_no_readable_path_fails_naming_the_path(env: Env) -> None:
    body = result(await env.call("get_context", req({"paths": ["config/secrets.md"]})), 403, "denied")
    assert codes(body) == ["access.forbidden_scope"] and "config/secrets.md" in body["errors"][0]["message"]


@pytest.mark.anyio
async def test_ask_extractive_answer_has_citations(env: Env) -> None:
    body = result(await env.call("ask", req({"question": "密钥轮换怎么做"})), 200, "passed")
    d = body["data"]
    assert d["mode"] == "extractive" and d["answer"].startswith("[1] ")
    assert d["citations"] and all(c["dataset"] == "public" for c in d["citations"])
    assert body["errors"] == []


@pytest.mark.anyio
async def test_improvement_task_scope_must_be_inside_the_policy(env: Env) -> None:
    task = {"goal": "补充生产数据库权限申请流程", "scope": {"paths": ["guide/**"]},
            "evidence": [{"question": "如何申请生产数据库权限"}]}
    key = canonical_dedupe_key("create_improvement_task", task)
    ok = result(await env.call("create_improvement_task", req(task, dedupeKey=key, idempotencyKey="task-0001")),
                200, "passed")
    assert ok["data"]["kind"] == "improvement_task" and ok["data"]["recordId"].startswith("task_")
    outside = dict(task, scope={"paths": ["secret/**"]})
    r = await env.call("create_improvement_task",
                       req(outside, dedupeKey=canonical_dedupe_key("create_improvement_task", outside)))
    assert codes(result(r, 403, "denied")) == ["access.forbidden_scope"]
    other_ds = dict(task, scope={"datasets": ["internal"]})
    r2 = await env.call("create_improvement_task",
                        req(other_ds, dedupeKey=canonical_dedupe_key("create_improvement_task", other_ds)))
    assert codes(result(r2, 403, "denied")) == ["access.dataset_not_allowed"]


@pytest.mark.anyio
async def test_write_tools_require_dedupe_key(env: Env) -> None:
    r = await env.call("create_feedback", {"caller": {"type": "agent"}, "input": {"kind": "other", "message": "x"}})
    assert codes(result(r, 400, "failed")) == ["access.request_invalid"]


# ================================================================ concurrency


@pytest.mark.anyio
async def test_parallel_feedback_over_http_files_once(env: Env) -> None:
    fb = {"kind": "missing_content", "message": "缺少生产数据库权限申请流程"}
    key = canonical_dedupe_key("create_feedback", fb)
    callers = ["alice", "bob"] * 10
    rs = await asyncio.gather(*[env.call("create_feedback", req(fb, dedupeKey=key, idempotencyKey=f"par-{i:04d}"), who)
                                for i, who in enumerate(callers)])
    bodies = [result(r, 200, "passed") for r in rs]
    assert len({b["data"]["recordId"] for b in bodies}) == 1
    assert sorted(b["data"]["count"] for b in bodies) == list(range(1, 21))
    with sqlite3.connect(env.root / "feedback.sqlite3") as db:
        assert db.execute("SELECT count(*), max(count) FROM records").fetchone() == (1, 20)


@pytest.mark.anyio
async def test_parallel_retries_of_one_key_get_one_result(env: Env) -> None:
    fb = {"kind": "outdated", "message": "部署文档已过期"}
    body = req(fb, dedupeKey=canonical_dedupe_key("create_feedback", fb), idempotencyKey="same-retry-01")
    rs = await asyncio.gather(*[env.call("create_feedback", body, "bob") for _ in range(12)])
    datas = [result(r, 200, "passed")["data"] for r in rs]
    assert all(d == datas[0] for d in datas) and datas[0]["count"] == 1


# ================================================================ schema contract, one per tool


CONTRACT_CASES: list[tuple[str, str, dict[str, Any], str, Callable[[dict[str, Any]], None] | None]] = [
    ("search", "bob", {"query": "密钥轮换"}, "search", None),
    ("ask", "bob", {"question": "密钥轮换"}, "ask", None),
    ("get_page", "alice", {"path": "guide/key-rotation.md", "fullText": True}, "get_page", None),
    ("get_context", "bob", {"question": "密钥"}, "get_context", None),
    ("create_feedback", "bob", {"kind": "wrong_answer", "message": "契约测试", "question": "契约",
                                "citations": [{"docId": "guide/key-rotation.md", "title": "密钥轮换",
                                               "path": "guide/key-rotation.md", "route": "support",
                                               "revision": "r"}]}, "FeedbackRequest", None),
    ("create_improvement_task", "bob", {"goal": "契约测试任务", "scope": {"paths": ["guide/**"]},
                                        "priority": "low"}, "ImprovementTaskRequest", None),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "who", "input", "input_schema", "_"), CONTRACT_CASES,
                         ids=[c[0] for c in CONTRACT_CASES])
async def test_schema_contract_per_tool(env: Env, tool: str, who: str, input: dict[str, Any],
                                        input_schema: str, _: Any) -> None:
    if input_schema in ("FeedbackRequest", "ImprovementTaskRequest"):
        access_validator(input_schema).validate(input)
        extra = {"dedupeKey": canonical_dedupe_key(tool, input), "idempotencyKey": f"contract-{tool}"}
    else:
        inputs = access_validator("ToolInputs")
        from jsonschema import Draft202012Validator
        Draft202012Validator(inputs.schema["$defs"][input_schema]).validate(input)
        extra = {}
    body = req(input, requestId=f"contract-{tool}", **extra)
    out = result(await env.call(tool, body, who), 200, "passed")
    assert out["tool"] == tool and out["requestId"] == f"contract-{tool}"
    assert out["auditRef"] == env.audit_lines()[-1]["audit_ref"]
    # the validator must bite: a result missing its data shape is rejected
    broken = dict(out, data={"unexpected": True})
    assert not RESULT.is_valid(broken)


def test_schema_rejects_what_the_contract_forbids() -> None:
    assert not REQUEST.is_valid({"caller": {"type": "human"}, "input": {}})
    assert not REQUEST.is_valid({"caller": {"type": "agent"}, "input": {}, "token": "x"})
    write = access_validator("WriteResult")
    assert not write.is_valid({"recordId": "fb_" + "0" * 24, "kind": "feedback", "state": "open", "count": 1,
                               "createdAt": 1, "deduped": False, "issueNumber": 42})
    ans = access_validator("Answer")
    assert not ans.is_valid({"answer": None, "citations": [], "mode": "extractive"})  # no reason, no actions


# ================================================================ upstream Answer API


def answer_service(reply: dict[str, Any] | None, status: int = 200) -> httpx.AsyncClient:
    """A real ASGI answer service (not a mock of httpx): records what it was sent."""
    seen: list[dict[str, Any]] = []

    async def handle(request: Request) -> JSONResponse:
        seen.append(await request.json())
        return JSONResponse(reply or {}, status_code=status)

    app = Starlette(routes=[Route("/answer", handle, methods=["POST"])])
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://answer")
    client.seen = seen  # type: ignore[attr-defined]
    return client


PASSAGES = [answer.Passage("新旧两把密钥可以同时生效", 3.0,
                           {"docId": "guide/key-rotation.md", "title": "密钥轮换", "path": "guide/key-rotation.md",
                            "route": "support", "revision": "r"})]


@pytest.mark.anyio
async def test_upstream_answer_cannot_widen_scope() -> None:
    c = answer_service({"answer": "可以同时生效 [p1]", "citations": ["p1", "p9"]})
    got = await answer.upstream(c, "http://answer/answer", "密钥轮换", PASSAGES, 3)
    assert got["answer"] and [x["docId"] for x in got["citations"]] == ["guide/key-rotation.md"]
    assert c.seen[0]["passages"][0]["text"] == PASSAGES[0].text  # type: ignore[attr-defined]
    access_validator("Answer").validate(got)
    await c.aclose()


@pytest.mark.anyio
async def test_upstream_no_answer_is_a_no_answer() -> None:
    c = answer_service({"answer": None, "citations": []})
    got = await answer.upstream(c, "http://answer/answer", "q", PASSAGES, 3)
    assert got["noAnswerReason"] == "upstream_no_answer" and got["actions"]
    access_validator("Answer").validate(got)
    await c.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "retryable"), [(503, True), (500, True), (400, False)])
async def test_upstream_failure_is_tool_failed(status: int, retryable: bool) -> None:
    c = answer_service({"error": "x"}, status)
    with pytest.raises(ToolError) as e:
        await answer.upstream(c, "http://answer/answer", "q", PASSAGES, 3)
    assert e.value.code == "access.tool_failed" and e.value.retryable is retryable
    await c.aclose()


@pytest.mark.anyio
async def test_path_glob_too_complex_is_a_request_error_not_a_failed_tool(env: Env) -> None:
    r = await env.call("search", req({"query": "密钥", "limit": 5}, scope={"paths": ["**/" + "?" * 40]}))
    body = result(r, 400, "failed")
    assert codes(body) == ["access.request_invalid"]
    assert "scope.paths[0]" in body["errors"][0]["message"]


@pytest.mark.anyio
async def test_a_canonical_dedupe_key_must_be_the_hash_of_its_own_input(env: Env) -> None:
    mine = {"kind": "no_answer", "message": "找不到退款窗口说明"}
    theirs = {"kind": "other", "message": "另一条无关的反馈"}
    ok = await env.call("create_feedback", req(mine, dedupeKey=canonical_dedupe_key("create_feedback", mine)), "alice")
    assert ok.status_code == 200
    # reusing alice's content hash for different content must not fold bob's feedback into hers
    r = await env.call("create_feedback", req(theirs, dedupeKey=canonical_dedupe_key("create_feedback", mine)), "bob")
    body = result(r, 400, "failed")
    assert codes(body) == ["access.request_invalid"]
    assert "sha256:" in body["errors"][0]["message"]


@pytest.mark.anyio
async def test_a_clients_own_dedupe_key_is_the_records_identity(env: Env) -> None:
    # Agent Access API 技术设计 §9.5/§10: the dedupeKey is required and excludes the caller id; a client's own
    # well-formed key is accepted as the identity.
    first = {"kind": "no_answer", "message": "找不到退款窗口说明"}
    reworded = {"kind": "no_answer", "message": "退款窗口的说明在哪里？"}
    a = result(await env.call("create_feedback", req(first, dedupeKey="alice:refund-window"), "alice"), 200, "passed")
    assert (a["data"]["deduped"], a["data"]["count"]) == (False, 1)
    b = result(await env.call("create_feedback", req(reworded, dedupeKey="alice:refund-window"), "alice"),
               200, "passed")
    assert (b["data"]["recordId"], b["data"]["deduped"], b["data"]["count"]) == (a["data"]["recordId"], True, 2)
    assert codes(b) == ["access.feedback_deduped"] and "not filed separately" in b["errors"][0]["message"]
    # Another client's key that collides is the same record too (documented: namespace your keys).
    c = result(await env.call("create_feedback", req({"kind": "other", "message": "无关"},
                                                     dedupeKey="alice:refund-window"), "bob"), 200, "passed")
    assert (c["data"]["recordId"], c["data"]["count"]) == (a["data"]["recordId"], 3)
    d = result(await env.call("create_feedback", req(first, dedupeKey="bob:refund-window"), "bob"), 200, "passed")
    assert d["data"]["recordId"] != a["data"]["recordId"] and not d["data"]["deduped"]
    with sqlite3.connect(env.root / "feedback.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (2,)


@pytest.mark.anyio
async def test_improvement_task_records_the_granted_scope_not_the_request(env: Env) -> None:
    task = {"goal": "补充密钥轮换说明", "scope": {"paths": ["**"]}}
    r = await env.call("create_improvement_task",
                       req(task, dedupeKey=canonical_dedupe_key("create_improvement_task", task)))
    result(r, 200, "passed")
    with sqlite3.connect(env.root / "feedback.sqlite3") as db:
        (record,) = db.execute("SELECT body FROM records WHERE kind = 'improvement_task'").fetchone()
    assert "`guide/**`, `long/**`, `ops/**`" in record  # bob's policy, not the raw request
    assert "`**`" not in record


@pytest.mark.anyio
@pytest.mark.parametrize("headers", [{"content-type": "text/plain"},
                                     {"content-type": "application/x-www-form-urlencoded"},
                                     {"content-type": "application/json; charset=latin-1"},
                                     {"content-type": "application/json", "content-encoding": "gzip"}])
async def test_body_must_be_plain_json(env: Env, headers: dict[str, str]) -> None:
    body = orjson.dumps(req({"query": "密钥", "limit": 3}))
    r = await env.http.post("/agent-access/v1/tools/search", content=body,
                            headers={"authorization": f"Bearer {TOKENS['bob']}", **headers})
    assert codes(result(r, 400, "failed")) == ["access.request_invalid"]


@pytest.mark.anyio
async def test_an_oversized_body_is_413_in_the_tool_envelope(env: Env) -> None:
    # It was 400 access.request_invalid, where every other caller answers 413.
    body = orjson.dumps(req({"query": "密钥" + "x" * (32 * 1024), "limit": 3}))
    r = await env.http.post("/agent-access/v1/tools/search", content=body,
                            headers={"authorization": f"Bearer {TOKENS['bob']}", "content-type": "application/json"})
    out = result(r, 413, "failed")
    assert codes(out) == ["access.request_too_large"]
    assert out["errors"][0]["retryable"] is False and "32768 bytes" in out["errors"][0]["message"]
    assert out["errors"][0]["message"] == "the request body exceeds 32768 bytes"  # it said "body body"


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD"])
async def test_other_methods_are_405_in_the_tool_envelope_with_allow(env: Env, method: str) -> None:
    r = await env.http.request(method, "/agent-access/v1/tools/search",
                               headers={"authorization": f"Bearer {TOKENS['bob']}"})
    assert r.status_code == 405 and r.headers["allow"] == "POST", r.text
    assert r.headers["content-type"].startswith("application/json") and r.headers["cache-control"] == "no-store"
    if method != "HEAD":
        body = orjson.loads(r.content)
        RESULT.validate(body)
        assert body["status"] == "failed" and codes(body) == ["access.method_not_allowed"]


@pytest.mark.anyio
async def test_every_response_is_no_store(env: Env) -> None:
    for method, path in (("GET", "/agent-access/v1/tools/search"), ("GET", "/agent-api/v1/workspaces/support/nope"),
                         ("GET", "/nothing-here"), ("POST", "/volcengine/nobody"), ("GET", "/healthz")):
        r = await env.http.request(method, path)
        assert r.headers.get("cache-control") == "no-store", (method, path, r.status_code)


@pytest.mark.anyio
async def test_disabled_route_counts_only_when_named(env: Env) -> None:
    # alice's policy lists the disabled route 'off': unnamed, it is skipped (the absent
    # index of 'gone' still makes the answer partial); named, it is a warning of its own
    body = result(await env.call("search", req({"query": "密钥轮换"}), "alice"), 200, "partial")
    assert not any("'off'" in w["message"] for w in body["errors"])
    body = result(await env.call("search", req({"query": "密钥轮换"}, scope={"routes": ["support", "off"]}), "alice"),
                  200, "partial")
    assert any("'off'" in w["message"] for w in body["errors"])


@pytest.mark.anyio
async def test_audit_names_routes_and_what_a_denial_refused(env: Env) -> None:
    result(await env.call("search", req({"query": "密钥轮换"}, scope={"routes": ["support"]}), "bob"), 200, "passed")
    line = env.audit_lines()[-1]
    assert line["route"] == "support"
    r = await env.call("search", req({"query": "密钥", "limit": 5}, scope={"paths": ["secret/**"]}), "bob")
    result(r, 403, "denied")
    line = env.audit_lines()[-1]
    assert line["outcome"] == "denied" and line["scope"] == {"requested": {"paths": ["secret/**"]}}
    # a caller's requestId is echoed but never replaces the audit's own request id
    r = await env.call("search", req({"query": "密钥"}, requestId="caller-req-0001"), "bob")
    assert result(r, 200, "passed")["requestId"] == "caller-req-0001"
    assert env.audit_lines()[-1]["request_id"] != "caller-req-0001"
