"""gateway/agent/knowledge.py through the ASGI app: the protocol of Agent知识按需搜索与读取, every
schema, every error code, ref binding and lifetime, read pages and the read chain.

A real Tantivy index (a private copy per test), a real Redis nonce store, and the app's
injected clock; every response is validated against gateway/agent/schemas/*.json.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from gateway.agent.schemas import load
from gateway.core.errors import AGENT_CODES, DependencyUnavailable
from indexes.types import Document, Section
from tests.support.agent_env import (
    BASE,
    DOCS,
    LONG_TEXT,
    RUN_ID,
    SECRET_TEXT,
    TOKEN_ALICE,
    TOKEN_BOB,
    TOKEN_CAROL,
    EnvFactory,
    agent_section,
    make_config,
    ok,
    rejected,
)

pytestmark = pytest.mark.anyio
CHAIN_MAX = 131072

TOP = next(d for d in DOCS if d.id == "guide/key-rotation.md")  # the best hit for 密钥轮换


# ------------------------------------------------------------------ capabilities


async def test_capabilities_contract(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.get("support"), "bailing.agent-knowledge-capabilities.v1")
    assert body["supported"] is True and body["enabled"] is True and body["route"] == "support"
    assert body["limits"] == {"search_max_results": 3, "search_max_bytes": 4096, "read_default_bytes": 16384,
                              "read_max_bytes": 32768, "reference_ttl_seconds": 300,
                              "read_chain_max_bytes": 131072}
    assert body["delivery_modes"] == ["inline", "on_demand"]


async def test_capabilities_revision_matches_search(env: EnvFactory) -> None:
    e = await env()
    caps = ok(await e.get("support"), "bailing.agent-knowledge-capabilities.v1")
    found = ok(await e.search(), "bailing.agent-knowledge-search.v1")
    assert caps["knowledge_scope_revision"] == found["knowledge_scope_revision"]


@pytest.mark.parametrize("route", ["off", "gone"])
async def test_capabilities_not_enabled_when_disabled_or_unavailable(env: EnvFactory, route: str) -> None:
    e = await env()
    body = ok(await e.get(route), "bailing.agent-knowledge-capabilities.v1")
    assert body["supported"] is True and body["enabled"] is False


async def test_capabilities_revision_differs_per_policy(env: EnvFactory) -> None:
    e = await env()
    a = ok(await e.get("support"), "bailing.agent-knowledge-capabilities.v1")
    c = ok(await e.get("support", TOKEN_CAROL), "bailing.agent-knowledge-capabilities.v1")
    assert a["knowledge_scope_revision"] != c["knowledge_scope_revision"]


# ------------------------------------------------------------------ search


async def test_search_contract(env: EnvFactory) -> None:
    e = await env()
    r = await e.search(limit=3, run_id=RUN_ID)
    body = ok(r, "bailing.agent-knowledge-search.v1")
    assert body["status"] == "ok" and body["trust"] == "reference_only" and body["run_id"] == RUN_ID
    assert 1 <= len(body["hints"]) <= 3
    assert len(r.content) <= 4096
    assert body["hints"][0]["title"] == "密钥轮换"
    assert body["hints"][0]["expires_at"] == "2027-01-15T08:05:00Z"  # NOW + 300 s


async def test_search_summaries_are_excerpts_of_the_document(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search(), "bailing.agent-knowledge-search.v1")
    texts = {d.title: d.text for d in DOCS}
    for h in body["hints"]:
        assert h["summary"].rstrip("…") in texts[h["title"]], h


async def test_search_never_returns_hidden_config_state_or_working_docs(env: EnvFactory) -> None:
    e = await env()
    for q in ["密钥轮换配置", "密钥轮换状态", "密钥轮换草稿", "密钥轮换内部", SECRET_TEXT]:
        body = ok(await e.search(q), "bailing.agent-knowledge-search.v1")
        titles = {h["title"] for h in body["hints"]}
        assert titles.isdisjoint({"密钥轮换配置", "密钥轮换状态", "密钥轮换草稿", "密钥轮换内部"}), (q, titles)
        # hints did come back: the visible pages that share the question's words, and only those
        assert titles == {"密钥轮换", "部署与密钥"}, (q, titles)


async def test_search_route_filter_narrows(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search("密钥", route="ops"), "bailing.agent-knowledge-search.v1")
    assert [h["title"] for h in body["hints"]] == ["部署与密钥"]


async def test_search_client_policy_narrows_datasets_and_paths(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search("密钥", token=TOKEN_CAROL), "bailing.agent-knowledge-search.v1")
    # carol: dataset public, paths guide/** → not replay (internal), not ops/deploy (ops/**)
    assert [h["title"] for h in body["hints"]] == ["密钥轮换"]


async def test_search_drops_hints_rather_than_exceed_4096_bytes(env: EnvFactory) -> None:
    e = await env()
    r = await e.search("预算说明 很长的标题", limit=3)
    body = ok(r, "bailing.agent-knowledge-search.v1")
    assert len(r.content) <= 4096
    assert body["truncated"] is True
    assert 1 <= len(body["hints"]) < 3
    for h in body["hints"]:  # whole hints: titles are never cut to fit
        assert len(h["title"]) == 200 and h["title"].startswith("预算说明")


async def test_search_limit_one(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search("密钥", limit=1), "bailing.agent-knowledge-search.v1")
    assert len(body["hints"]) == 1 and body["truncated"] is False


async def test_search_status_disabled(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search(route="off"), "bailing.agent-knowledge-search.v1")
    assert body["status"] == "disabled" and body["hints"] == []


async def test_search_status_unavailable(env: EnvFactory) -> None:
    e = await env()
    body = ok(await e.search(route="gone"), "bailing.agent-knowledge-search.v1")
    assert body["status"] == "unavailable" and body["hints"] == []


async def test_search_threshold_is_not_lowered_to_fill(env: EnvFactory) -> None:
    e = await env()
    # Floor 1: only a chunk holding every term of the question; none holds 步骤 beside 轮换 and 密钥.
    body = ok(await e.search("轮换密钥的步骤", route="strict"), "bailing.agent-knowledge-search.v1")
    assert body["status"] == "ok" and body["hints"] == []


@pytest.mark.parametrize("payload", [
    {"query": ""}, {"query": "   "}, {"query": "字" * 2001}, {"query": 5},
    {"query": "密钥", "limit": 0}, {"query": "密钥", "limit": 4}, {"query": "密钥", "limit": True},
    {"query": "密钥", "limit": "3"}, {"query": "密钥", "run_id": "not-a-uuid"},
    {"query": "密钥", "kb_ids": ["docs"]}, {"limit": 3},
], ids=lambda p: ",".join(p))
async def test_search_request_invalid(env: EnvFactory, payload: dict[str, Any]) -> None:
    e = await env()
    rejected(await e.post("support", "search", payload), 400, "knowledge_request_invalid")


@pytest.mark.parametrize("raw", [b"not json", b"[1,2]", b"", "{\"query\": \"\xff\"}".encode("latin-1")])
async def test_search_body_not_a_json_object(env: EnvFactory, raw: bytes) -> None:
    e = await env()
    rejected(await e.post("support", "search", raw), 400, "knowledge_request_invalid")


async def test_search_query_of_2000_chars_is_accepted(env: EnvFactory) -> None:
    e = await env()
    ok(await e.search("密" * 2000), "bailing.agent-knowledge-search.v1")


async def test_request_too_large(env: EnvFactory) -> None:
    e = await env()
    rejected(await e.post("support", "search", b"{" + b" " * 20000 + b"}"), 413, "knowledge_request_too_large")


async def test_method_not_allowed_is_json_no_store(env: EnvFactory) -> None:
    e = await env()
    r = await e.http.get(f"{BASE}/support/knowledge/search", headers={"authorization": f"Bearer {TOKEN_ALICE}"})
    rejected(r, 405, "knowledge_method_not_allowed")
    assert r.headers["allow"] == "POST"


# ------------------------------------------------------------------ identity and policy


@pytest.mark.parametrize("headers", [
    {}, {"authorization": "Bearer wrong-token-XXXXXXXXXXXXXXXX"}, {"authorization": f"Basic {TOKEN_ALICE}"},
    {"authorization": "Bearer short"}, {"authorization": f"Bearer {TOKEN_ALICE} "},
], ids=["none", "unknown", "basic", "short", "trailing-space"])
async def test_unauthorized(env: EnvFactory, headers: dict[str, str]) -> None:
    e = await env()
    r = await e.http.post(f"{BASE}/support/knowledge/search", content='{"query":"密钥"}'.encode(), headers=headers)
    rejected(r, 401, "access.unauthorized")


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer  "])
async def test_the_bearer_scheme_is_read_in_any_case(env: EnvFactory, scheme: str) -> None:
    # RFC 7235 §2.1 (any case), RFC 6750 §2.1 (1*SP): "bearer <token>" was 401 access.unauthorized.
    e = await env()
    ok(await e.search(token=None, headers={"authorization": f"{scheme} {TOKEN_ALICE}"}),
       "bailing.agent-knowledge-search.v1")


async def test_unauthorized_repeated_authorization_header(env: EnvFactory) -> None:
    e = await env()
    r = await e.http.post(f"{BASE}/support/knowledge/search", content='{"query":"密钥"}'.encode(),
                          headers=[("authorization", f"Bearer {TOKEN_ALICE}"),
                                   ("authorization", f"Bearer {TOKEN_BOB}")])
    rejected(r, 401, "access.unauthorized")


async def test_unauthorized_malformed_session_header(env: EnvFactory) -> None:
    e = await env()
    rejected(await e.search(headers={"x_agent_session": "bad session!"}), 401, "access.unauthorized")


@pytest.mark.parametrize("route", ["ops", "nope", "gone"])
async def test_forbidden_route(env: EnvFactory, route: str) -> None:
    e = await env()
    rejected(await e.search(route=route, token=TOKEN_BOB), 403, "access.forbidden_scope")
    rejected(await e.get(route, TOKEN_BOB), 403, "access.forbidden_scope")


async def test_forbidden_index(env: EnvFactory) -> None:
    agent = agent_section()
    agent["clients"]["alice"]["indexes"] = ["other"]
    e = await env(agent=agent)
    rejected(await e.search(), 403, "access.forbidden_scope")


async def test_forbidden_tool(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref(token=TOKEN_CAROL)
    rejected(await e.read(ref, token=TOKEN_CAROL), 403, "access.forbidden_tool")


async def test_dataset_not_allowed_when_route_and_policy_share_none(env: EnvFactory) -> None:
    agent = agent_section()
    agent["routes"]["support"]["datasets"] = ["internal"]
    e = await env(agent=agent)
    rejected(await e.search(token=TOKEN_CAROL), 403, "access.dataset_not_allowed")


@pytest.mark.parametrize("case", ["bad-token", "forbidden-route", "forbidden-tool", "invalid-body"])
async def test_denied_requests_never_reach_the_index(env: EnvFactory, case: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    calls: list[str] = []
    real = e.rt.index
    monkeypatch.setattr(e.rt, "index", lambda name: calls.append(name) or real(name))
    if case == "bad-token":
        r = await e.search(token="nobody-XXXXXXXXXXXXXXXXXXXX")
    elif case == "forbidden-route":
        r = await e.search(route="ops", token=TOKEN_BOB)
    elif case == "forbidden-tool":
        r = await e.read(ref, token=TOKEN_CAROL)
    else:
        r = await e.post("support", "search", {"query": "密钥", "limit": 9})
    assert r.status_code in (400, 401, 403)
    assert calls == []
    ok(await e.search(), "bailing.agent-knowledge-search.v1")
    assert calls == ["docs"]  # the spy does see an allowed call


# ------------------------------------------------------------------ read


async def test_read_contract_short_document(env: EnvFactory) -> None:
    e = await env()
    ref, found = await e.first_ref(run_id=RUN_ID)
    r = await e.read(ref, run_id=RUN_ID)
    body = ok(r, "bailing.agent-knowledge-read.v1")
    assert body["title"] == "密钥轮换" and body["ref"] == ref and body["run_id"] == RUN_ID
    assert body["content"] == TOP.text
    assert body["next_cursor"] is None and body["truncated"] is False and body["budget_exhausted"] is False
    assert body["total_content_bytes"] == len(TOP.text.encode())
    assert body["revision"] == found["hints"][0]["revision"]
    assert body["knowledge_scope_revision"] == found["knowledge_scope_revision"]
    assert len(r.content) <= 16384


async def _chain(e: Any, ref: str, max_bytes: int) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = await e.read(ref, max_bytes=max_bytes, cursor=cursor)
        body = ok(r, "bailing.agent-knowledge-read.v1")
        assert len(r.content) <= max_bytes, (len(r.content), max_bytes)
        pages.append(body)
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100


async def test_read_chain_stops_at_131072_bytes_on_a_long_chinese_document(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref("运维手册")
    pages = await _chain(e, ref, 32768)
    content = "".join(p["content"] for p in pages)
    delivered = len(content.encode("utf-8"))
    assert LONG_TEXT.startswith(content)  # in order, nothing skipped or repeated, no split character
    assert delivered <= CHAIN_MAX < delivered + len(LONG_TEXT[len(content)].encode("utf-8"))
    last = pages[-1]
    assert last["truncated"] is True and last["budget_exhausted"] is True and last["next_cursor"] is None
    for p in pages[:-1]:
        assert p["truncated"] is True and p["budget_exhausted"] is False and p["next_cursor"]
    assert all(p["total_content_bytes"] == len(LONG_TEXT.encode()) for p in pages)
    assert all(p["read_chain_max_bytes"] == CHAIN_MAX for p in pages)


@pytest.mark.parametrize("max_bytes", [4096, 4097, 5003, 16384, 32768])
async def test_read_pages_fit_max_bytes_and_never_split_a_character(env: EnvFactory, max_bytes: int) -> None:
    e = await env()
    ref, _ = await e.first_ref("运维手册")
    cursor = None
    content = ""
    for _ in range(3):
        r = await e.read(ref, max_bytes=max_bytes, cursor=cursor)
        body = ok(r, "bailing.agent-knowledge-read.v1")
        assert len(r.content) <= max_bytes
        assert len(r.content) > max_bytes - 8  # filled: a page stops within one escaped character
        content += body["content"]
        cursor = body["next_cursor"]
    assert LONG_TEXT.startswith(content)


async def test_read_default_page_is_16384(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref("运维手册")
    r = await e.read(ref)
    ok(r, "bailing.agent-knowledge-read.v1")
    assert 16384 - 8 < len(r.content) <= 16384


@pytest.mark.parametrize("payload", [
    {"max_bytes": 4095}, {"max_bytes": 32769}, {"max_bytes": "16384"}, {"cursor": 7}, {"doc_id": "x"},
    {"run_id": "X"},
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
async def test_read_request_invalid(env: EnvFactory, payload: dict[str, Any]) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    rejected(await e.read(ref, **payload), 400, "knowledge_request_invalid")


async def test_read_without_ref_is_invalid_request(env: EnvFactory) -> None:
    e = await env()
    rejected(await e.post("support", "read", {"max_bytes": 4096}), 400, "knowledge_request_invalid")


# ------------------------------------------------------------------ ref binding (400)


async def test_ref_minted_for_client_a_is_rejected_for_client_b(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    ok(await e.read(ref), "bailing.agent-knowledge-read.v1")
    rejected(await e.read(ref, token=TOKEN_BOB), 400, "knowledge_reference_invalid")


@pytest.mark.parametrize("change", ["session", "on_behalf_of", "run", "route"])
async def test_ref_bound_to_session_principal_run_and_route(env: EnvFactory, change: str) -> None:
    e = await env()
    ref, _ = await e.first_ref(run_id=RUN_ID, headers={"x_agent_session": "s1", "x_on_behalf_of": "u1"})
    same: dict[str, Any] = {"run_id": RUN_ID, "headers": {"x_agent_session": "s1", "x_on_behalf_of": "u1"}}
    ok(await e.read(ref, **same), "bailing.agent-knowledge-read.v1")
    other = {**same, "headers": dict(same["headers"])}
    if change == "session":
        other["headers"]["x_agent_session"] = "s2"
    elif change == "on_behalf_of":
        other["headers"]["x_on_behalf_of"] = "u2"
    elif change == "run":
        other["run_id"] = "0b5e7c1a-2f4d-4e6b-9a8c-000000000000"
    else:
        other["route"] = "strict"
    rejected(await e.read(ref, **other), 400, "knowledge_reference_invalid")


def _flip(token: str, at: int) -> str:
    c = "A" if token[at] != "A" else "B"
    return token[:at] + c + token[at + 1:]


@pytest.mark.parametrize("where", ["payload", "signature", "garbage", "forged"])
async def test_tampered_ref_is_invalid(env: EnvFactory, where: str) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    if where == "payload":
        bad = _flip(ref, 5)
    elif where == "signature":
        bad = _flip(ref, len(ref) - 3)
    elif where == "garbage":
        bad = "not a ref at all"
    else:  # a well-formed payload naming the hidden document, with a made-up signature
        payload = base64.urlsafe_b64encode(orjson.dumps({"doc_id": "guide/hidden.md"})).rstrip(b"=").decode()
        bad = payload + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    rejected(await e.read(bad), 400, "knowledge_reference_invalid")


async def test_cursor_of_another_ref_or_a_ref_as_cursor_is_invalid(env: EnvFactory) -> None:
    e = await env()
    long_ref, _ = await e.first_ref("运维手册")
    short_ref, _ = await e.first_ref()
    page = ok(await e.read(long_ref, max_bytes=4096), "bailing.agent-knowledge-read.v1")
    rejected(await e.read(short_ref, cursor=page["next_cursor"]), 400, "knowledge_reference_invalid")
    rejected(await e.read(long_ref, cursor=long_ref), 400, "knowledge_reference_invalid")
    rejected(await e.read(long_ref, cursor=_flip(page["next_cursor"], 4)), 400, "knowledge_reference_invalid")


# ------------------------------------------------------------------ lifetime (410)


async def test_ref_lives_300_seconds_and_not_one_more(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    e.clock.advance(300)
    ok(await e.read(ref), "bailing.agent-knowledge-read.v1")
    e.clock.advance(1)
    rejected(await e.read(ref), 410, "knowledge_reference_expired")


async def test_another_identitys_expired_ref_is_invalid_not_expired(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    e.clock.advance(301)
    rejected(await e.read(ref, token=TOKEN_BOB), 400, "knowledge_reference_invalid")


async def test_cursor_cannot_outlive_its_ref(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref("运维手册")
    e.clock.advance(200)
    page = ok(await e.read(ref, max_bytes=4096), "bailing.agent-knowledge-read.v1")
    e.clock.advance(101)  # cursor is 101 s old, the ref 301 s
    rejected(await e.read(ref, cursor=page["next_cursor"]), 410, "knowledge_reference_expired")


# ------------------------------------------------------------------ changes (409)


def _replace(doc: Document, **kw: Any) -> Document:
    from dataclasses import replace
    return replace(doc, **kw)


@pytest.mark.parametrize("change", ["updated", "deleted", "hidden"])
async def test_ref_does_not_outlive_a_document_change(env: EnvFactory, change: str) -> None:
    e = await env()
    ref, _ = await e.first_ref()
    ok(await e.read(ref), "bailing.agent-knowledge-read.v1")
    target = TOP
    if change == "updated":
        e.reingest([_replace(target, sections=(Section("", "新版：密钥轮换改为每季度一次。"),))])
    elif change == "hidden":
        e.reingest([_replace(target, qa_visible=False)])
    else:
        e.reingest([d for d in DOCS if d.id != target.id], delete_missing=True)
    body = rejected(await e.read(ref), 409, "knowledge_changed")
    assert "新版" not in str(body)


async def test_a_ref_and_its_cursor_outlive_a_commit_that_changed_other_documents(env: EnvFactory) -> None:
    """Agent知识按需搜索与读取 binds a ref to the document's revision, not to the index generation: a commit
    that adds or changes another document keeps the ref and its cursors readable; the answer's
    knowledge_scope_revision (which covers the generation) moves."""
    e = await env()
    ref, found = await e.first_ref("运维手册")
    first = ok(await e.read(ref, max_bytes=4096), "bailing.agent-knowledge-read.v1")
    e.reingest([Document("guide/new.md", "新文档", (Section("", "与密钥无关的新内容。"),), path="guide/new.md")])
    e.reingest([_replace(next(d for d in DOCS if d.id == "ops/deploy.md"), sections=(Section("", "部署的新说明。"),))])
    again = ok(await e.read(ref, max_bytes=4096), "bailing.agent-knowledge-read.v1")
    assert again["content"] == first["content"] and again["revision"] == first["revision"]
    assert again["knowledge_scope_revision"] != found["knowledge_scope_revision"]
    nxt = ok(await e.read(ref, max_bytes=4096, cursor=first["next_cursor"]), "bailing.agent-knowledge-read.v1")
    assert nxt["content"] and nxt["content"] != first["content"]


async def test_policy_change_is_a_scope_change(env: EnvFactory, root: Any, redis_url: str, key_prefix: str) -> None:

    e = await env()
    ref, _ = await e.first_ref()
    agent = agent_section()
    agent["clients"]["alice"]["datasets"] = ["public", "internal"]
    e.rt.config = make_config(root, redis_url, key_prefix, agent=agent)  # as a reload swaps it
    rejected(await e.read(ref), 409, "knowledge_scope_changed")


async def test_disabled_route_is_a_scope_change(env: EnvFactory, root: Any, redis_url: str, key_prefix: str) -> None:

    e = await env()
    ref, _ = await e.first_ref()
    agent = agent_section()
    agent["routes"]["support"]["enabled"] = False
    e.rt.config = make_config(root, redis_url, key_prefix, agent=agent)
    rejected(await e.read(ref), 409, "knowledge_scope_changed")


async def test_policy_losing_the_route_is_forbidden(env: EnvFactory, root: Any, redis_url: str,
                                                    key_prefix: str) -> None:

    e = await env()
    ref, _ = await e.first_ref()
    agent = agent_section()
    agent["clients"]["alice"]["routes"] = ["ops"]
    e.rt.config = make_config(root, redis_url, key_prefix, agent=agent)
    rejected(await e.read(ref), 403, "access.forbidden_scope")


# ------------------------------------------------------------------ unavailable (503)


async def test_read_unavailable(env: EnvFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    e = await env()
    ref, _ = await e.first_ref()

    def down(name: str) -> Any:
        raise DependencyUnavailable("index_unavailable", f"index {name!r} is not available")

    monkeypatch.setattr(e.rt, "index", down)
    body = rejected(await e.read(ref), 503, "knowledge_unavailable")
    assert body["error"]["retryable"] is True
    found = ok(await e.search(), "bailing.agent-knowledge-search.v1")
    assert found["status"] == "unavailable" and found["hints"] == []


# ------------------------------------------------------------------ the table itself


def test_every_agent_code_is_in_the_error_schema() -> None:
    enum = load("bailing.agent-knowledge-error.v1")["properties"]["error"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(AGENT_CODES)


def test_seed_codes_have_the_seed_statuses() -> None:
    want = {"knowledge_reference_invalid": 400, "knowledge_reference_expired": 410,
            "knowledge_scope_changed": 409, "knowledge_changed": 409, "knowledge_unavailable": 503,
            "access.unauthorized": 401, "access.forbidden_tool": 403, "access.forbidden_scope": 403,
            "access.dataset_not_allowed": 403}
    assert {k: AGENT_CODES[k][0] for k in want} == want


async def test_a_bug_is_a_bare_500_without_detail(env: EnvFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.agent import knowledge as agent_knowledge

    def boom(*a: Any, **kw: Any) -> Any:
        raise RuntimeError(f"kaboom at {e.root}")

    e = await env()
    monkeypatch.setattr(agent_knowledge, "scope_revision", boom)
    body = rejected(await e.search(), 500, "internal")
    assert "kaboom" not in str(body)
    assert e.audit_lines()[-1]["outcome"] == "failed"


@pytest.mark.parametrize(("schema", "good", "bad"), [
    ("bailing.agent-knowledge-search-request.v1", {"query": "密钥", "limit": 3, "run_id": RUN_ID},
     [{"query": ""}, {"query": "字" * 2001}, {"query": "密钥", "limit": 4}, {"query": "密钥", "kb_ids": []}]),
    ("bailing.agent-knowledge-read-request.v1", {"ref": "r", "max_bytes": 16384, "cursor": None},
     [{"ref": ""}, {"ref": "r", "max_bytes": 4095}, {"ref": "r", "max_bytes": 32769}, {"ref": "r", "doc_id": "x"}]),
])
def test_request_schemas_match_what_the_server_accepts(schema: str, good: dict[str, Any],
                                                       bad: list[dict[str, Any]]) -> None:
    import jsonschema

    v = jsonschema.Draft202012Validator(load(schema))
    assert v.is_valid(good)
    assert [b for b in bad if v.is_valid(b)] == []
