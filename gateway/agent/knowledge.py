"""The agent knowledge protocol `bailing.agent-knowledge.v1` (seed 000), three endpoints:

    GET  /agent-api/v1/workspaces/{route}/knowledge/capabilities
    POST /agent-api/v1/workspaces/{route}/knowledge/search   {query, limit, run_id?}
    POST /agent-api/v1/workspaces/{route}/knowledge/read     {ref, run_id?, max_bytes?, cursor?}

Each call: Bearer token → principal (gateway.agent.principals) → effective scope through the
one scope engine (gateway.core.scope.resolve_agent) → index → a JSON body validated in tests
against gateway/agent/schemas/*.json. Every response carries `Cache-Control: no-store`; every
call writes one audit line (gateway.core.audit). Errors use `AGENT_CODES` and carry no
internal address, credential or document text.

Byte budgets are UTF-8 bytes of the whole response JSON: search ≤ 4096 (hints dropped
from the lowest score, never cut), a read page ≤ max_bytes (content cut only between
characters), a read chain ≤ 131072 content bytes.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.agent.principals import authenticate_agent
from gateway.agent.refs import RefClaims, RefSigner
from gateway.core import audit
from gateway.core.bodies import BodyLimitExceeded, json_media_problem, read_limited
from gateway.core.config import AgentClient, AgentRoute, Config
from gateway.core.errors import AgentError, DependencyUnavailable, KnowledgeError
from gateway.core.scope import (
    EffectiveScope,
    Principal,
    agent_configuration,
    allows,
    resolve_agent,
    scope_revision,
)
from gateway.core.types import KIB
from indexes.errors import IndexStoreError
from indexes.store import KnowledgeIndex

if TYPE_CHECKING:
    from gateway.serve.app import Runtime

log = logging.getLogger("kbgate.agent")

PROTOCOL = "bailing.agent-knowledge.v1"
PREFIX = "/agent-api/v1/workspaces/{route}/knowledge"
# seed 000 "协商与兼容": the fixed limits object.
LIMITS: dict[str, int] = {
    "search_max_results": 3,
    "search_max_bytes": 4096,
    "read_default_bytes": 16384,
    "read_max_bytes": 32768,
    "reference_ttl_seconds": 300,
    "read_chain_max_bytes": 131072,
}
READ_MIN_BYTES = 4096
QUERY_MAX_CHARS = 2000
SUMMARY_CHARS = 120  # excerpt of the matching passage; three CJK summaries fit the budget
TITLE_CHARS = 200
MAX_BODY_BYTES = 16 * KIB
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEADERS = {"cache-control": "no-store", "content-type": "application/json; charset=utf-8"}


@dataclass(slots=True)
class Call:
    """One authenticated call: what handlers need, and what the audit line records."""

    rt: Runtime
    cfg: Config
    request: Request
    route_name: str
    client: AgentClient
    principal: Principal
    event: audit.AuditEvent

    def signer(self) -> RefSigner:
        key = self.cfg.agent.ref_key
        if key is None:  # config guarantees a key when clients exist
            raise KnowledgeError("knowledge_unavailable")
        return RefSigner(key, self.rt.clock)


Handler = Callable[[Call], Awaitable[dict[str, Any]]]


def _dumps(obj: object) -> bytes:
    return orjson.dumps(obj)


def _head(schema_version: str, call: Call, run_id: str | None) -> dict[str, Any]:
    """The fields every search/read answer starts with (seed 000): schema, protocol, route, run."""
    head: dict[str, Any] = {"schema_version": schema_version, "protocol": PROTOCOL, "route": call.route_name}
    if run_id is not None:
        head["run_id"] = run_id
    return head


def error_body(err: AgentError) -> bytes:
    return _dumps({"schema_version": "bailing.agent-knowledge-error.v1", "protocol": PROTOCOL,
                   "error": {"code": err.code, "message": err.message, "retryable": err.retryable}})


def _endpoint(tool: str, method: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        rt: Runtime = request.app.state.runtime
        cfg = rt.config  # read once: a reload mid-request changes nothing here
        started = time.perf_counter()
        event = audit.AuditEvent(ts=rt.clock.now(), request_id=uuid.uuid4().hex[:16], tool=tool,
                                 route=request.path_params.get("route", ""))
        status = 200
        try:
            if request.method != method:
                raise KnowledgeError("knowledge_method_not_allowed", f"use {method}")
            client, principal = authenticate_agent(request.headers, cfg.agent)
            event.principal = principal
            call = Call(rt, cfg, request, event.route, client, principal, event)
            body = _dumps(await handler(call))
        except AgentError as err:
            status, event.code = err.status, err.code
            body = error_body(err)
        except Exception:  # a bug: answer 500 without detail, keep the trace in the log
            log.exception("agent knowledge internal error", extra={"request_id": event.request_id})
            bug = AgentError("internal", "internal error")
            status, event.code = bug.status, bug.code
            body = error_body(bug)
        event.status = status
        if status != 200:  # a 200 keeps the outcome its handler set (passed, partial, failed)
            event.outcome = audit.outcome_of(status)
        event.duration_ms = (time.perf_counter() - started) * 1000.0
        audit.write(cfg.audit, event)
        headers = {**_HEADERS, "x-request-id": event.request_id}
        if status == 405:
            headers["allow"] = method
        return Response(body, status_code=status, headers=headers)

    return endpoint


def routes() -> list[Route]:
    """The Starlette routes of the protocol (every method reaches the handler, which
    answers 405 itself so that even that answer is JSON with no-store)."""
    every = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return [
        Route(f"{PREFIX}/capabilities", _endpoint("knowledge.capabilities", "GET", capabilities), methods=every),
        Route(f"{PREFIX}/search", _endpoint("knowledge.search", "POST", search), methods=every),
        Route(f"{PREFIX}/read", _endpoint("knowledge.read", "POST", read), methods=every),
    ]


# ------------------------------------------------------------------ shared steps


def _open_index(call: Call, eff: EffectiveScope) -> tuple[KnowledgeIndex, int]:
    """The scope's index and its generation. Raises DependencyUnavailable."""
    idx = call.rt.index(eff.index)
    try:
        return idx, idx.stats().generation
    except (IndexStoreError, OSError, ValueError):
        raise DependencyUnavailable("index_unavailable") from None


def _revision(call: Call, route: AgentRoute, eff: EffectiveScope, generation: int | None) -> str:
    return scope_revision(eff, agent_configuration(route, call.client), generation)


async def _json_body(request: Request) -> dict[str, Any]:
    media = json_media_problem(request.headers.get("content-type"), request.headers.get("content-encoding"))
    if media is not None:
        raise KnowledgeError("knowledge_request_invalid", media[1])
    try:
        raw = await read_limited(request.stream(), MAX_BODY_BYTES,
                                 request.app.state.runtime.config.server.body_timeout_seconds)
    except BodyLimitExceeded as exc:
        code = "knowledge_request_too_large" if exc.kind == "too_large" else "knowledge_request_invalid"
        raise KnowledgeError(code, exc.message) from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise KnowledgeError("knowledge_request_invalid", "the body is not JSON") from None
    if not isinstance(data, dict):
        raise KnowledgeError("knowledge_request_invalid", "the body is not a JSON object")
    return data


def _only(data: dict[str, Any], allowed: set[str]) -> None:
    for k in data:
        if k not in allowed:
            raise KnowledgeError("knowledge_request_invalid", f"unknown field {k[:40]!r}")


def _run_id(data: dict[str, Any]) -> str | None:
    run_id = data.get("run_id")
    if run_id is None:
        return None
    if not isinstance(run_id, str) or not _UUID.fullmatch(run_id):
        raise KnowledgeError("knowledge_request_invalid", "run_id must be a lower-case UUID")
    return run_id


def _int(data: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = data.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise KnowledgeError("knowledge_request_invalid", f"{key} must be an integer from {lo} to {hi}")
    return v


def _rfc3339(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ------------------------------------------------------------------ capabilities


async def capabilities(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-capabilities.v1` for the route (seed 000 "协商与兼容")."""
    route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, call.route_name, None)
    call.event.scope = eff.summary()
    generation: int | None = None
    available = False
    try:
        _, generation = _open_index(call, eff)
        available = True
    except DependencyUnavailable:
        pass
    enabled = route.enabled and available and "knowledge.search" in call.client.policy.tools
    return {
        "schema_version": "bailing.agent-knowledge-capabilities.v1",
        "protocol": PROTOCOL,
        "supported": True,
        "route": call.route_name,
        "enabled": enabled,
        "knowledge_scope_revision": _revision(call, route, eff, generation),
        "delivery_modes": ["inline", "on_demand"],
        "limits": dict(LIMITS),
    }


# ------------------------------------------------------------------ search


async def search(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-search.v1` (seed 000 "独立搜索")."""
    data = await _json_body(call.request)
    _only(data, {"query", "limit", "run_id"})
    query = data.get("query")
    if not isinstance(query, str) or not query.strip() or len(query) > QUERY_MAX_CHARS:
        raise KnowledgeError("knowledge_request_invalid", f"query must be 1 to {QUERY_MAX_CHARS} characters")
    limit = _int(data, "limit", LIMITS["search_max_results"], 1, LIMITS["search_max_results"])
    run_id = _run_id(data)
    call.event.run_id = run_id
    # Denials raise here, before any index is touched (seed 002 §14 "不调用下游").
    route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, call.route_name, "knowledge.search")
    call.event.scope = eff.summary()
    out = _head("bailing.agent-knowledge-search.v1", call, run_id)
    status = "ok"
    generation: int | None = None
    hits = []
    if not route.enabled:
        status = "disabled"
    else:
        try:
            idx, generation = _open_index(call, eff)
            hits = idx.search(query, limit, filter=eff.filter, one_per_document=True,
                              summary_chars=SUMMARY_CHARS, content_chars=1)
        except (DependencyUnavailable, IndexStoreError, OSError, ValueError):
            status, hits = "unavailable", []
    revision = _revision(call, route, eff, generation)
    out |= {"knowledge_scope_revision": revision, "trust": "reference_only", "status": status}
    signer = call.signer() if hits else None
    hints: list[dict[str, Any]] = []
    for h in hits:
        # Never lowered to fill the list; re-checked against the scope (defence in depth).
        if h.score < route.min_score or not allows(eff, h.path, h.dataset, True):
            continue
        assert signer is not None
        expires = signer.expiry()
        ref = signer.mint_ref(RefClaims(
            client=call.client.id, session=call.principal.session, on_behalf_of=call.principal.on_behalf_of,
            route=call.route_name, run_id=run_id, scope_revision=revision, doc_id=h.doc_id,
            revision=h.revision, expires_at=expires))
        hints.append({"ref": ref, "title": _clip(h.title, TITLE_CHARS), "summary": h.summary,
                      "revision": h.revision, "score": round(h.score, 4), "expires_at": _rfc3339(expires)})
    truncated = False
    while True:
        body = {**out, "hints": hints, "truncated": truncated}
        if len(_dumps(body)) <= LIMITS["search_max_bytes"] or not hints:
            break
        hints = hints[:-1]  # drop the lowest-scored hint, never cut one
        truncated = True
    call.event.extra = {"hints": len(hints), "search_status": status}
    call.event.outcome = {"partial": "partial", "unavailable": "failed"}.get(status, "passed")
    return body


# ------------------------------------------------------------------ read


async def read(call: Call) -> dict[str, Any]:
    """`bailing.agent-knowledge-read.v1` (seed 000 "按引用分页读取").

    Checks, in order: body → route/tool policy (401/403) → ref signature (400) →
    identity/route/run binding (400) → ref and cursor expiry (410) → route enabled (409
    scope changed) → index (503) → document exists, visible, same revision (409
    knowledge_changed) → scope revision (409 knowledge_scope_changed).
    """
    data = await _json_body(call.request)
    _only(data, {"ref", "run_id", "max_bytes", "cursor"})
    ref = data.get("ref")
    if not isinstance(ref, str) or not ref:
        raise KnowledgeError("knowledge_request_invalid", "ref must be a non-empty string")
    cursor_token = data.get("cursor")
    if cursor_token is not None and not isinstance(cursor_token, str):
        raise KnowledgeError("knowledge_request_invalid", "cursor must be a string or null")
    max_bytes = _int(data, "max_bytes", LIMITS["read_default_bytes"], READ_MIN_BYTES, LIMITS["read_max_bytes"])
    run_id = _run_id(data)
    call.event.run_id = run_id
    route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, call.route_name, "knowledge.read")
    call.event.scope = eff.summary()

    signer = call.signer()
    claims = signer.open_ref(ref)
    p = call.principal
    if (claims.client, claims.session, claims.on_behalf_of, claims.route, claims.run_id) != (
            call.client.id, p.session, p.on_behalf_of, call.route_name, run_id):
        raise KnowledgeError("knowledge_reference_invalid", "the reference belongs to another identity, route or run")
    cursor = signer.open_cursor(cursor_token, ref) if cursor_token is not None else None
    if signer.expired(claims.expires_at) or (cursor is not None and signer.expired(cursor.expires_at)):
        raise KnowledgeError("knowledge_reference_expired")
    if not route.enabled:
        raise KnowledgeError("knowledge_scope_changed", "the route is disabled")
    try:
        idx, generation = _open_index(call, eff)
        doc = idx.get_document(claims.doc_id, include_hidden=True)
    except (DependencyUnavailable, IndexStoreError, OSError, ValueError):
        raise KnowledgeError("knowledge_unavailable") from None
    if doc is None or not doc.qa_visible or doc.revision != claims.revision:
        raise KnowledgeError("knowledge_changed")
    revision = _revision(call, route, eff, generation)
    if revision != claims.scope_revision or not allows(eff, doc.path, doc.dataset, doc.qa_visible):
        raise KnowledgeError("knowledge_scope_changed")

    base = _head("bailing.agent-knowledge-read.v1", call, run_id)
    base |= {"knowledge_scope_revision": revision, "ref": ref, "revision": doc.revision,
             "title": _clip(doc.title, TITLE_CHARS), "trust": "reference_only"}
    offset = cursor.offset if cursor is not None else 0
    consumed = cursor.consumed if cursor is not None else 0
    if offset > len(doc.text) or consumed > LIMITS["read_chain_max_bytes"]:
        raise KnowledgeError("knowledge_reference_invalid")
    body = page(base, doc.text, offset, consumed, max_bytes,
                lambda end, used: signer.mint_cursor(ref, end, used))
    call.event.extra = {"content_bytes": len(body["content"].encode("utf-8")),
                        "budget_exhausted": body["budget_exhausted"]}
    return body


def page(base: dict[str, Any], text: str, offset: int, consumed: int, max_bytes: int,
         mint_cursor: Callable[[int, int], str]) -> dict[str, Any]:
    """One read page of `text` from character `offset`, with `consumed` content bytes
    already delivered in the chain.

    The content is the longest run of whole characters such that the complete response
    JSON is ≤ max_bytes and the chain stays ≤ read_chain_max_bytes. The page ends the
    chain (next_cursor None) at the end of the text, or — with truncated and
    budget_exhausted true — when the next character would pass the chain budget.
    `truncated` is true whenever the content stops before the end of the text.
    """
    chain_max = LIMITS["read_chain_max_bytes"]
    window = text[offset: offset + max_bytes]  # a character is ≥ 1 byte: nothing beyond can fit
    sizes = [0]
    for ch in window:
        sizes.append(sizes[-1] + len(ch.encode("utf-8")))
    total = len(text.encode("utf-8"))
    budget = chain_max - consumed

    def build(k: int) -> dict[str, Any]:
        end = offset + k
        used = consumed + sizes[k]
        at_end = end == len(text)
        exhausted = not at_end and used + len(text[end].encode("utf-8")) > chain_max
        return {**base, "content": window[:k],
                "next_cursor": None if at_end or exhausted else mint_cursor(end, used),
                "truncated": not at_end, "budget_exhausted": exhausted,
                "total_content_bytes": total, "read_chain_max_bytes": chain_max}

    def fits(k: int) -> bool:
        return len(_dumps(build(k))) <= max_bytes

    hi = len(window)
    while hi > 0 and sizes[hi] > budget:
        hi -= 1
    lo = 0
    if fits(hi):  # only k = hi can end the chain (no cursor), so test it on its own
        lo = hi
    else:
        hi -= 1
    while lo < hi:  # largest k in [0, hi] that fits; below hi the size grows with k
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not fits(lo):  # the cursor's length is only nearly monotone
        lo -= 1
    result = build(lo)
    if lo == 0 and result["next_cursor"] is not None:
        raise AgentError("internal", "a read page cannot hold any content")
    return result
