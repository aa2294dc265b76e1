"""Try a question exactly as a caller would: `/admin/try` and `kbgate try`.

Rationale: docs/design-notes.md, "gateway/console/try_.py".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request
from starlette.types import Message

from gateway.agent import knowledge
from gateway.agent.tools import run_tool
from gateway.agent.tools.clients import LazyClients
from gateway.agent.tools.request import ToolsWire
from gateway.console.callers import CALLERS
from gateway.console.gaps.record import gap_view
from gateway.console.i18n import _
from gateway.core import audit
from gateway.core.config import AgentClient, Config
from gateway.core.errors import AgentError, CallbackError, TryInvalid
from gateway.core.events import Delivery
from gateway.core.explain import Explain, SearchTrace, explaining
from gateway.core.frame import Call, Reply, Wire
from gateway.core.runtime import Runtime
from gateway.core.scope import Principal
from gateway.dify.retrieval import retrieval
from gateway.dify.wire import DifyWire
from gateway.volcengine.handler import answer as volcengine_answer
from gateway.volcengine.wire import error_body
from indexes.types import Hit

__all__ = ["CALLERS", "TryRequest", "Tried", "check", "index_names", "routes_of", "run", "to_json"]

MAX_QUERY_CHARS = 2000
MAX_LIMIT = 50


@dataclass(frozen=True, slots=True)
class TryRequest:
    """One try. caller: one of CALLERS. query: the question (raw). limit: Limit / limit / top_k
    (None: the caller's default; MCP has none: mcp.max_results). tenant, first, second: the
    Volcengine route. client: the agent client id; token_id: which of its tokens (default the
    first), session / on_behalf_of: as X-Agent-Session / X-On-Behalf-Of. route: the knowledge
    route (knowledge, dify: knowledge_id; mcp: optional, else every route of the client).
    metadata_condition: Dify's object as the caller sends it (None: none); score_threshold:
    Dify's retrieval_setting.score_threshold. request_id: the tool API caller's requestId.
    successor: an index name to search in place of the route's. Validated by `check`."""

    caller: str
    query: str
    limit: int | None = None
    tenant: str = ""
    first: str = ""
    second: str = ""
    client: str = ""
    token_id: str = ""
    session: str = ""
    on_behalf_of: str = ""
    route: str = ""
    metadata_condition: Any = None
    score_threshold: float = 0.0
    request_id: str = ""
    successor: str = ""

    def label(self) -> str:
        """A short, text-free name of the caller and route, e.g. 'volcengine acme tech/software'."""
        if self.caller == "volcengine":
            return f"volcengine {self.tenant} {self.first}/{self.second}"
        return f"{self.caller} {self.client} {self.route or '*'}".rstrip()


@dataclass(slots=True)
class Tried:
    """The outcome of one try: the HTTP status and answer body the caller would get (MCP: the
    tool result's text), the traces, the whole time (ms) and the try's own request id."""

    request: TryRequest
    status: int
    body: bytes
    explain: Explain
    total_ms: float
    request_id: str
    stages_ms: dict[str, float] = field(default_factory=dict)


def check(cfg: Config, req: TryRequest) -> None:
    """Refuse a try the config cannot run, naming the field. Raises TryInvalid."""
    if req.caller not in CALLERS:
        raise TryInvalid("caller", _("must be one of %(callers)s", callers=", ".join(CALLERS)))
    if not req.query.strip():
        raise TryInvalid("query", _("is empty"))
    if len(req.query) > MAX_QUERY_CHARS:
        raise TryInvalid("query", _("is longer than %(n)s characters", n=MAX_QUERY_CHARS))
    if req.limit is not None and not 1 <= req.limit <= MAX_LIMIT:
        raise TryInvalid("limit", _("must be 1..%(n)s", n=MAX_LIMIT))
    if req.successor and req.successor not in index_names(cfg):
        raise TryInvalid("successor", _("no index %(index)r under indexes.dir", index=req.successor))
    if req.caller == "volcengine":
        tenant = cfg.tenants.get(req.tenant)
        if tenant is None:
            raise TryInvalid("tenant", _("no tenant %(tenant)r", tenant=req.tenant))
        if not any(r.first_level_id == req.first and r.second_level_id == req.second for r in tenant.routes):
            raise TryInvalid("first/second", _("tenant %(tenant)r has no route %(first)s/%(second)s", tenant=req.tenant,
                                                first=req.first, second=req.second))
        return
    client = cfg.agent.clients.get(req.client)
    if client is None:
        raise TryInvalid("client", _("no agent client %(client)r", client=req.client))
    if req.token_id and all(t.id != req.token_id for t in client.tokens):
        raise TryInvalid("token_id", _("client %(client)r has no token %(token)r", client=req.client,
                                       token=req.token_id))
    if req.caller in ("knowledge", "dify") and not req.route:
        raise TryInvalid("route", _("is required for this caller"))


def index_names(cfg: Config) -> list[str]:
    """Sorted names of the indexes under indexes.dir (folders holding a meta.json) and of those
    served by an engine (`Config.remote`): the successors a try may search."""
    d = cfg.indexes_dir
    found = {p.name for p in d.iterdir() if (p / "meta.json").is_file()} if d.is_dir() else set()
    return sorted(found | set(cfg.remote))


async def run(rt: Runtime, req: TryRequest, who: str = "admin") -> Tried:
    """Answer `req` as its caller would be answered now (module doc); audit it as `who` (the console user's name).
    Raises TryInvalid (`check`); every answer of the wing, errors included, is a Tried."""
    cfg = rt.config
    check(cfg, req)
    ex = Explain()
    if req.successor:
        ex.successor = _successors(cfg, req)
    request_id = uuid.uuid4().hex[:16]
    started = time.perf_counter()
    with explaining(ex):
        if req.caller == "volcengine":
            status, body = await _volcengine(rt, cfg, req, request_id)
        else:
            status, body = await _agent(rt, cfg, req, request_id)
    total = (time.perf_counter() - started) * 1000.0
    tried = Tried(req, status, body, ex, total, request_id, _stages(ex, total))
    gap = gap_view(cfg, routes_of(cfg, req), [h.relevance for t in ex.traces for h in t.kept])
    for t in ex.traces:
        t.gap = gap
    _audit(cfg, tried, who)
    return tried


def routes_of(cfg: Config, req: TryRequest) -> tuple[str, ...]:
    """The route ids the try's question is asked over, as the gap rule keys them
    (`gateway.core.events.Asker.routes`)."""
    if req.caller == "volcengine":
        return (f"{req.tenant}/{req.first}/{req.second}",)
    return (req.route,) if req.route else tuple(cfg.agent.clients[req.client].policy.routes)


def _successors(cfg: Config, req: TryRequest) -> dict[str, str]:
    """Every index the caller's routes search → the successor."""
    if req.caller == "volcengine":
        names = {r.index for r in cfg.tenants[req.tenant].routes}
    else:
        names = {r.index for r in cfg.agent.routes.values()}
    return dict.fromkeys(names, req.successor)


def _stages(ex: Explain, total: float) -> dict[str, float]:
    """Time per stage (ms): each search's stages summed, the explanation searches, and the rest
    (parsing, scope resolution, the wing's shaping)."""
    out: dict[str, float] = {}
    for t in ex.traces:
        for name, ms in t.stages_ms.items():
            out[name] = out.get(name, 0.0) + ms
    explained = sum(t.explain_ms for t in ex.traces)
    out["request_and_shaping"] = max(0.0, total - sum(out.values()) - explained)
    out["explanation (not in the caller's time)"] = explained
    return out


async def _volcengine(rt: Runtime, cfg: Config, req: TryRequest, request_id: str) -> tuple[int, bytes]:
    tenant = cfg.tenants[req.tenant]
    fields: dict[str, Any] = {"FirstLevelId": req.first, "SecondLevelId": req.second, "Query": req.query}
    if req.limit is not None:
        fields["Limit"] = req.limit
    d = Delivery(request_id=request_id, tenant=tenant.name, received_at=rt.clock.now())
    try:
        return 200, await volcengine_answer(rt, cfg, tenant, orjson.dumps(fields), d)
    except CallbackError as err:  # as the wing answers it (VolcengineWing.__call__)
        return err.status, error_body(err)


def _principal(client: AgentClient, req: TryRequest) -> Principal:
    """The principal `gateway.core.principals.authenticate_agent` gives this client's token."""
    token_id = req.token_id or client.tokens[0].id
    return Principal("agent_client", client.id, token_id, req.session or f"token:{token_id}",
                     req.on_behalf_of or None)


def _request(path: str, body: bytes, path_params: Mapping[str, str]) -> Request:
    """A POST of `body` (JSON) to `path`, as the frame's handlers read it."""
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "scheme": "http", "server": ("kbgate-try", 0), "client": None,
             "http_version": "1.1", "path_params": dict(path_params),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def _agent(rt: Runtime, cfg: Config, req: TryRequest, request_id: str) -> tuple[int, bytes]:
    client = cfg.agent.clients[req.client]
    principal = _principal(client, req)
    tool = {"knowledge": "knowledge.search", "tools": "access.search", "dify": "dify.retrieval",
            "mcp": "mcp.search"}[req.caller]
    event = audit.AuditEvent(ts=rt.clock.now(), request_id=request_id, tool=tool, route=req.route,
                             wing={"knowledge": "agent", "tools": "agent"}.get(req.caller, req.caller),
                             principal=principal)
    if req.caller == "mcp":
        return await _mcp(rt, cfg, client, principal, event, req)
    wire: Wire
    if req.caller == "knowledge":
        wire = knowledge.KnowledgeWire()
        body: dict[str, Any] = {"query": req.query}
        if req.limit is not None:
            body["limit"] = req.limit
        path = knowledge.PREFIX.replace("{route}", req.route) + "/search"
    elif req.caller == "tools":
        wire = ToolsWire()
        body = {"caller": {"type": "agent"}, "input": {"query": req.query}}
        if req.limit is not None:
            body["input"]["limit"] = req.limit
        if req.route:
            body["scope"] = {"routes": [req.route]}
        if req.request_id:
            body["requestId"] = req.request_id
        path = "/agent-access/v1/tools/search"
    else:
        wire = DifyWire()
        body = {"knowledge_id": req.route, "query": req.query,
                "retrieval_setting": {"top_k": req.limit if req.limit is not None else 4,
                                      "score_threshold": req.score_threshold},
                "metadata_condition": req.metadata_condition}
        path = cfg.dify.prefix + "/retrieval"
    call = Call(rt, cfg, _request(path, orjson.dumps(body), {"route": req.route, "tool": "search"}), client,
                principal, event, wire)
    clients = LazyClients(rt)
    try:
        if req.caller == "knowledge":
            reply: Reply = wire.answer(call, await knowledge.search(call))
        elif req.caller == "tools":
            reply = wire.answer(call, await run_tool(call, "search", clients))
        else:
            reply = wire.answer(call, await retrieval(call))
    except AgentError as err:  # as the frame answers it (gateway.core.frame.endpoint)
        reply = wire.refuse(event, call, err)
    finally:
        await clients.close()
    return reply.status, reply.body


async def _mcp(rt: Runtime, cfg: Config, client: AgentClient, principal: Principal, event: audit.AuditEvent,
               req: TryRequest) -> tuple[int, bytes]:
    if "mcp.search" not in client.policy.tools:
        raise TryInvalid("client", _("client %(client)r has no mcp.search grant: its MCP clients see no search tool",
                                      client=client.id))
    from gateway.mcp.server import tool_result  # the MCP SDK loads only for an MCP try (gateway.mcp.transport)
    from gateway.mcp.tools import McpCall

    arguments: dict[str, Any] = {"query": req.query}
    if req.route:
        arguments["route"] = req.route
    result = await tool_result(McpCall(rt, cfg, client, principal, event), "search", arguments)
    text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
    return 200, str(text).encode("utf-8")


def _audit(cfg: Config, tried: Tried, who: str) -> None:
    """The console user's own audit line (`who`: their name): which caller and route were tried,
    how it went; never the question. Written, not published: no metric or delivery observer sees a try."""
    req = tried.request
    scopes = [t.scope for t in tried.explain.traces]
    event = audit.AuditEvent(ts=time.time(), request_id=tried.request_id, tool="admin.try", route=req.label(),
                             wing="admin", principal=Principal("admin", who), scope={"searched": scopes},
                             outcome="passed" if tried.status < 400 else "failed", status=tried.status,
                             duration_ms=tried.total_ms,
                             extra={"caller": req.caller, "successor": req.successor or None,
                                    "hits": sum(len(t.kept) for t in tried.explain.traces)})
    audit.write(cfg.audit, event)


# ------------------------------------------------------------------ the explanation as JSON


def _scores(h: Hit) -> dict[str, float | None]:
    s = h.scores
    return {"bm25": s.bm25, "dense": s.dense, "fused": s.fused, "rerank": s.rerank}


def _hit(h: Hit, trace: SearchTrace, rank: int) -> dict[str, Any]:
    return {"rank": rank, "id": h.id, "doc_id": h.doc_id, "chunk": h.chunk, "title": h.title, "path": h.path,
            "dataset": h.dataset, "heading": trace.heading.get(h.id, ""), "score": h.score,
            "relevance": h.relevance, "scores": _scores(h), "terms": trace.terms.get(h.id, []),
            "synonym_terms": _via(trace, h)}


def _via(trace: SearchTrace, h: Hit) -> list[dict[str, str]]:
    return [{"synonym": syn, "term": term} for syn, term in trace.synonym_terms.get(h.id, [])]


def to_json(tried: Tried) -> dict[str, Any]:
    """The try as a JSON-able dict: caller, status, body (text) and answer (parsed when JSON),
    per search its scope, cache outcome, generation, stage times, kept and dropped hits."""
    try:
        parsed: Any = orjson.loads(tried.body)
    except orjson.JSONDecodeError:
        parsed = None
    searches = []
    for t in tried.explain.traces:
        searches.append({
            "index": t.index, "scope": t.scope, "limit": t.limit, "floor": t.floor,
            "metadata_conditions": len(t.where.conditions) if t.where is not None else 0,
            "cache": t.cache, "generation": t.generation, "stages_ms": t.stages_ms, "explain_ms": t.explain_ms,
            "expansions": [{"term": term, "synonym": syn} for term, syn in t.expansions],
            "analysis": [{"word": a.word, "weight": a.weight, "matched": a.matched, "via": a.via}
                         for a in t.analysis],
            "cosine_line": t.cosine_line, "dials": t.dials, "gap": t.gap, "answered": t.answered,
            "kept": [_hit(h, t, i + 1) for i, h in enumerate(t.kept)],
            "dropped": [{"id": d.hit.id, "doc_id": d.hit.doc_id, "chunk": d.hit.chunk, "title": d.hit.title,
                         "path": d.hit.path, "score": d.hit.score, "relevance": d.hit.relevance,
                         "reason": d.reason, "by": d.by, "terms": t.terms.get(d.hit.id, []),
                         "synonym_terms": _via(t, d.hit)} for d in t.dropped]})
    return {"caller": tried.request.caller, "route": tried.request.label(), "successor": tried.request.successor,
            "request_id": tried.request_id, "status": tried.status, "body": tried.body.decode("utf-8", "replace"),
            "answer": parsed, "gap": next((t.gap for t in tried.explain.traces), None), "total_ms": tried.total_ms,
            "stages_ms": tried.stages_ms, "searches": searches,
            "merged_out": [{"route": str(k), "id": d.hit.id, "title": d.hit.title, "reason": d.reason}
                           for k, d in tried.explain.merged]}
