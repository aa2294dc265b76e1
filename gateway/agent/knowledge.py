"""The agent knowledge protocol `bailing.agent-knowledge.v1` (Agent知识按需搜索与读取), three endpoints:

Rationale: docs/design-notes.md, "gateway/agent/knowledge.py".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from starlette.routing import Route

from gateway.agent.paging import READ_CHAIN_MAX_BYTES, page
from gateway.core import audit, retrieve
from gateway.core.config import AgentRoute, floor_of
from gateway.core.errors import AgentError, DependencyUnavailable, KnowledgeError
from gateway.core.events import Asker
from gateway.core.frame import Call, Reply, dumps, endpoint
from gateway.core.refs import RefSigner, check_holder, holder, read_by_ref
from gateway.core.runtime import Runtime
from gateway.core.scope import (
    EffectiveScope,
    agent_configuration,
    configuration_revision,
    resolve_agent,
    scope_revision,
)
from gateway.core.types import KIB
from gateway.core.validate import Problem, clip
from indexes.types import Hit

PROTOCOL = "bailing.agent-knowledge.v1"
PREFIX = "/agent-api/v1/workspaces/{route}/knowledge"
# Agent知识按需搜索与读取 "协商与兼容": the fixed limits object.
LIMITS: dict[str, int] = {
    "search_max_results": 3,
    "search_max_bytes": 4096,
    "read_default_bytes": 16384,
    "read_max_bytes": 32768,
    "reference_ttl_seconds": 300,
    "read_chain_max_bytes": READ_CHAIN_MAX_BYTES,
}
READ_MIN_BYTES = 4096
QUERY_MAX_CHARS = 2000
SUMMARY_CHARS = 120  # excerpt of the matching passage; three CJK summaries fit the budget
TITLE_CHARS = 200
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class KnowledgeWire:
    """The protocol's side of the frame: 16 KiB bodies, `knowledge_*` codes, its error envelope."""

    wing = "agent"
    max_body_bytes = 16 * KIB

    def invalid(self, problem: Problem) -> KnowledgeError:
        if problem.kind == "too_large":
            return KnowledgeError("knowledge_request_too_large", problem.message)
        if problem.kind == "unknown":
            return KnowledgeError("knowledge_request_invalid", f"unknown field {problem.key!r}")
        return KnowledgeError("knowledge_request_invalid", problem.message)

    def method_not_allowed(self, method: str) -> KnowledgeError:
        return KnowledgeError("knowledge_method_not_allowed", f"use {method}")

    def answer(self, call: Call, data: dict[str, Any]) -> Reply:
        return Reply(200, dumps(data), call.event.outcome)  # the handler set passed, partial or failed

    def refuse(self, event: audit.AuditEvent, call: Call | None, err: AgentError) -> Reply:
        body = dumps({"schema_version": "bailing.agent-knowledge-error.v1", "protocol": PROTOCOL,
                      "error": {"code": err.code, "message": err.message, "retryable": err.retryable}})
        return Reply(err.status, body, audit.outcome_of(err.status), err.code)


def routes(rt: Runtime) -> list[Route]:
    """The Starlette routes of the protocol (every method reaches the frame, which answers
    405 itself so that even that answer is JSON with no-store)."""
    every = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    wire = KnowledgeWire()
    return [
        Route(f"{PREFIX}/capabilities", endpoint(rt, wire, capabilities, tool="knowledge.capabilities", method="GET"),
              methods=every),
        Route(f"{PREFIX}/search", endpoint(rt, wire, search, tool="knowledge.search", method="POST"), methods=every),
        Route(f"{PREFIX}/read", endpoint(rt, wire, read, tool="knowledge.read", method="POST"), methods=every),
    ]


# ------------------------------------------------------------------ shared steps


def _resolve(call: Call, tool: str | None) -> tuple[AgentRoute, EffectiveScope]:
    """The route's effective scope; denials raise here, before any index is touched
    (Agent Access API 技术设计 §14 "不调用下游")."""
    route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, call.event.route, tool)
    call.event.scope = eff.summary()
    return route, eff


def _revision(call: Call, route: AgentRoute, eff: EffectiveScope, generation: int | None) -> str:
    return scope_revision(eff, agent_configuration(route, call.client), generation)


def _head(schema_version: str, call: Call, run_id: str | None) -> dict[str, Any]:
    """The fields every search/read answer starts with (Agent知识按需搜索与读取): schema, protocol, route, run."""
    head: dict[str, Any] = {"schema_version": schema_version, "protocol": PROTOCOL, "route": call.event.route}
    if run_id is not None:
        head["run_id"] = run_id
    return head


def _signer(call: Call) -> RefSigner:
    key = call.cfg.agent.ref_key
    if key is None:  # config guarantees a key when clients exist
        raise KnowledgeError("knowledge_unavailable")
    return RefSigner(key, call.rt.clock)


def _run_id(call: Call, data: Mapping[str, Any]) -> str | None:
    run_id = data.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not _UUID.fullmatch(run_id)):
        raise KnowledgeError("knowledge_request_invalid", "run_id must be a lower-case UUID")
    call.event.run_id = run_id
    return run_id


def _rfc3339(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ capabilities


async def capabilities(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-capabilities.v1` for the route (Agent知识按需搜索与读取 "协商与兼容")."""
    route, eff = _resolve(call, None)
    generation: int | None = None
    try:
        generation = retrieve.generation(call.rt, eff)
    except DependencyUnavailable:
        pass
    enabled = route.enabled and generation is not None and "knowledge.search" in call.client.policy.tools
    return {
        "schema_version": "bailing.agent-knowledge-capabilities.v1",
        "protocol": PROTOCOL,
        "supported": True,
        "route": call.event.route,
        "enabled": enabled,
        "knowledge_scope_revision": _revision(call, route, eff, generation),
        "delivery_modes": ["inline", "on_demand"],
        "limits": dict(LIMITS),
    }


# ------------------------------------------------------------------ search


async def search(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-search.v1` (Agent知识按需搜索与读取 "独立搜索")."""
    f = call.fields(await call.json_object())
    f.only({"query", "limit", "run_id"})
    query = f.string("query", non_blank=True, max_len=QUERY_MAX_CHARS)
    limit = f.integer("limit", LIMITS["search_max_results"], lo=1, hi=LIMITS["search_max_results"])
    run_id = _run_id(call, f.data)
    route, eff = _resolve(call, "knowledge.search")
    status, generation, hits = "ok", None, []
    if not route.enabled:
        status = "disabled"
    else:
        try:
            found = await retrieve.search(call.rt, eff, query, limit, summary_chars=SUMMARY_CHARS, content_chars=1,
                                          floor=floor_of(route.relevance_floor, call.cfg.search),
                                          with_generation=True, dials=route.dials,
                                          asker=Asker("knowledge", call.client.id, (route.name,), "search"))
            generation, hits = found.generation, found.hits
        except DependencyUnavailable:
            status, hits = "unavailable", []
    revision = _revision(call, route, eff, generation)
    out = _head("bailing.agent-knowledge-search.v1", call, run_id)
    out |= {"knowledge_scope_revision": revision, "trust": "reference_only", "status": status}
    signer = _signer(call) if hits else None
    bound = configuration_revision(eff, agent_configuration(route, call.client))  # what a ref binds
    hints = [_hint(call, signer, h, run_id, bound) for h in hits if signer is not None]
    truncated = False
    while True:
        body = {**out, "hints": hints, "truncated": truncated}
        if len(dumps(body)) <= LIMITS["search_max_bytes"] or not hints:
            break
        hints = hints[:-1]  # drop the lowest-scored hint, never cut one
        truncated = True
    call.event.extra = {"hints": len(hints), "search_status": status}
    call.event.outcome = {"partial": "partial", "unavailable": "failed"}.get(status, "passed")
    return body


def _hint(call: Call, signer: RefSigner, h: Hit, run_id: str | None, bound: str) -> dict[str, Any]:
    """One search hint with its signed ref, bound to this identity, route and run, the
    configuration revision `bound` and the hit's document revision (not the index generation)."""
    ref, expires = signer.mint_for(holder(call.client, call.principal, call.event.route, run_id), bound,
                                   h.doc_id, h.revision)
    return {"ref": ref, "title": clip(h.title, TITLE_CHARS), "summary": h.summary, "revision": h.revision,
            "score": round(h.relevance, 4), "expires_at": _rfc3339(expires)}


# ------------------------------------------------------------------ read


async def read(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-read.v1` (Agent知识按需搜索与读取 "按引用分页读取").

    Checks, in order: body → route/tool policy (401/403) → ref signature (400) →
    identity/route/run binding (400) → ref and cursor expiry (410) → route enabled (409
    scope changed) → index (503) → document exists, visible, same revision (409
    knowledge_changed) → scope revision (409 knowledge_scope_changed).
    """
    f = call.fields(await call.json_object())
    f.only({"ref", "run_id", "max_bytes", "cursor"})
    ref = f.string("ref")
    cursor_token = f.data.get("cursor")
    if cursor_token is not None and not isinstance(cursor_token, str):
        raise KnowledgeError("knowledge_request_invalid", "cursor must be a string or null")
    max_bytes = f.integer("max_bytes", LIMITS["read_default_bytes"], lo=READ_MIN_BYTES, hi=LIMITS["read_max_bytes"])
    run_id = _run_id(call, f.data)
    route, eff = _resolve(call, "knowledge.read")

    signer = _signer(call)
    claims = signer.open_ref(ref)
    check_holder(claims, holder(call.client, call.principal, call.event.route, run_id))
    cursor = signer.open_cursor(cursor_token, ref) if cursor_token is not None else None
    if signer.expired(claims.expires_at) or (cursor is not None and signer.expired(cursor.expires_at)):
        raise KnowledgeError("knowledge_reference_expired")
    doc, revision = read_by_ref(call.rt, route, call.client, eff, claims)

    base = _head("bailing.agent-knowledge-read.v1", call, run_id)
    base |= {"knowledge_scope_revision": revision, "ref": ref, "revision": doc.revision,
             "title": clip(doc.title, TITLE_CHARS), "trust": "reference_only"}
    offset = cursor.offset if cursor is not None else 0
    consumed = cursor.consumed if cursor is not None else 0
    if offset > len(doc.text) or consumed > READ_CHAIN_MAX_BYTES:
        raise KnowledgeError("knowledge_reference_invalid")
    body = page(base, doc.text, offset, consumed, max_bytes, lambda end, used: signer.mint_cursor(ref, end, used))
    call.event.extra = {"content_bytes": len(body["content"].encode("utf-8")),
                        "budget_exhausted": body["budget_exhausted"]}
    return body
