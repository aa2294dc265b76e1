"""Agent Access tool API (seed 002): `POST /agent-access/v1/tools/{tool}`.

One straight path per call:

    Bearer token → client, principal          (gateway.principals; never the body)
    body → AgentToolRequest                   (caller.type agent|system; scope; input; keys)
    scope → [(route, EffectiveScope)]         (gateway.scope.resolve_agent, per route: request ∩ route ∩ policy;
                                               denials raise here, before any index or tracker is called)
    tool                                      search | ask | get_page | get_context |
                                              create_feedback | create_improvement_task
    → AgentToolResult {tool, status, data, errors[], scope, requestId, auditRef} + one audit line

status: passed (200) | partial (200, warnings in errors[]) | denied (401/403) |
failed (4xx/5xx, or 200 for a strict no-answer). Never: reading the trees in
`gateway.scope.ALWAYS_EXCLUDED`, working docs without request *and* policy, full page text without the
'get_page.full_text' tool, writing published content (write tools only file tracker
records through the FeedbackBridge), tokens or unauthorized text in an error.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import orjson
import redis.asyncio as aioredis
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import answer, audit
from gateway.bodies import BodyLimitExceeded, json_media_problem, read_limited
from gateway.config import AgentClient, AgentRoute, Config
from gateway.errors import AccessDenied, AgentError, DependencyUnavailable, ToolError
from gateway.feedback import FeedbackBridge, IssueTracker
from gateway.feedback.github import GitHubTracker
from gateway.feedback.sqlite import SqliteTracker
from gateway.idempotency import CANONICAL_PREFIX, IdempotencyStore, canonical_dedupe_key, canonical_hash
from gateway.principals import authenticate_agent
from gateway.redis_clients import async_client
from gateway.scope import EffectiveScope, Principal, ScopeRequest, allows, resolve_agent
from gateway.types import KIB
from indexes.search import glob_problem
from indexes.store import KnowledgeIndex
from indexes.types import Hit, StoredDocument

if TYPE_CHECKING:
    from gateway.app import Runtime

log = logging.getLogger("kbgate.access")

PATH = "/agent-access/v1/tools/{tool}"
MAX_BODY_BYTES = 32 * KIB
SEARCH_MAX_RESULTS = 50
SNIPPET_CHARS = 200
PASSAGE_CHARS = 400
SUMMARY_CHARS = 300
_KEY = re.compile(r"[A-Za-z0-9._:-]{8,128}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_HEADERS = {"cache-control": "no-store", "content-type": "application/json; charset=utf-8"}
WRITE_TOOLS = ("create_feedback", "create_improvement_task")


# ------------------------------------------------------------------ per-worker state


class AccessState:
    """What the write tools and ask hold per worker: Redis client, idempotency store,
    tracker, bridge, and the HTTP client of the upstream Answer API (if any)."""

    def __init__(self, cfg: Config, rt: Runtime) -> None:
        a = cfg.access
        self.redis: aioredis.Redis | None = None
        self.bridge: FeedbackBridge | None = None
        tracker: IssueTracker
        if a.tracker == "github":
            assert a.github_repo is not None and a.github_token is not None
            tracker = GitHubTracker(repo=a.github_repo, token=a.github_token, map_path=a.github_map_path,
                                    api_url=a.github_api_url, clock=rt.clock)
        else:
            tracker = SqliteTracker(a.sqlite_path, rt.clock)
        self.tracker = tracker
        if cfg.replay.redis_url:
            self.redis = async_client(cfg.replay.redis_url, cfg.replay.timeout_seconds)
            store = IdempotencyStore(self.redis, cfg.replay.key_prefix, idempotency_ttl=a.idempotency_ttl_seconds,
                                     dedupe_ttl=a.dedupe_ttl_seconds, timeout=cfg.replay.timeout_seconds)
            self.bridge = FeedbackBridge(store, tracker, a.labels)
        self.answer_client = httpx.AsyncClient(timeout=a.answer_timeout_seconds) if a.answer_url else None

    async def close(self) -> None:
        await self.tracker.close()
        if self.redis is not None:
            await self.redis.aclose()
        if self.answer_client is not None:
            await self.answer_client.aclose()


def state(rt: Runtime, cfg: Config) -> AccessState:
    """The worker's AccessState, built on first use."""
    if rt.access is None:
        rt.access = AccessState(cfg, rt)
    st: AccessState = rt.access
    return st


# ------------------------------------------------------------------ one call


@dataclass(slots=True)
class Call:
    """One authenticated tool call. body: the validated AgentToolRequest.
    warnings: ErrorObjects to return with a passed/partial result."""

    rt: Runtime
    cfg: Config
    tool: str
    client: AgentClient
    principal: Principal
    body: dict[str, Any]
    event: audit.AuditEvent
    scopes: list[tuple[AgentRoute, EffectiveScope]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    partial: bool = False

    @property
    def input(self) -> dict[str, Any]:
        data: dict[str, Any] = self.body["input"]
        return data

    def warn(self, code: str, message: str, *, retryable: bool = False, severity: str = "warning") -> None:
        self.warnings.append({"code": code, "message": message, "retryable": retryable, "severity": severity})


def _error_object(err: AgentError | ToolError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": err.code, "message": err.message, "retryable": err.retryable,
                           "severity": "error"}
    if isinstance(err, ToolError) and err.retry_after is not None:
        out["retryAfterSeconds"] = err.retry_after
    return out


def public_scope(scopes: list[tuple[AgentRoute, EffectiveScope]]) -> dict[str, Any] | None:
    """EffectiveScope.json of the resolved routes (None before resolution)."""
    if not scopes:
        return None
    excluded: list[str] = []
    for _, eff in scopes:
        excluded += [g for g in eff.filter.exclude_path_globs if g not in excluded]
    return {
        "routes": [{"route": r.name,
                    "datasets": list(e.filter.datasets) if e.filter.datasets is not None else None,
                    "paths": list(e.filter.path_globs) if e.filter.path_globs is not None else None}
                   for r, e in scopes],
        "includeWorkingDocs": all(e.include_working_docs for _, e in scopes),
        "excludedPaths": excluded,
    }


def _requested_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """The audit-safe shape of a requested scope: route names, path globs, datasets (no text)."""
    return {k: scope[k] for k in ("routes", "paths", "datasets", "includeWorkingDocs") if k in scope}


async def endpoint(request: Request) -> Response:
    """POST /agent-access/v1/tools/{tool} → AgentToolResult JSON (see module doc)."""
    rt: Runtime = request.app.state.runtime
    cfg = rt.config
    started = time.perf_counter()
    tool = request.path_params["tool"]
    audit_ref = "aud_" + uuid.uuid4().hex
    event = audit.AuditEvent(ts=rt.clock.now(), request_id=uuid.uuid4().hex[:16], tool=f"access.{tool[:40]}",
                             route="")
    call: Call | None = None
    data: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = []
    status_word, http = "passed", 200
    try:
        client, principal = authenticate_agent(request.headers, cfg.agent)
        event.principal = principal
        handler = TOOLS.get(tool)
        if handler is None:
            raise ToolError("access.tool_unknown", "no such tool")
        body = await _request_body(request, client, tool)
        if "requestId" in body:
            event.extra["caller_request_id"] = body["requestId"]  # ours stays the audit key
        call = Call(rt, cfg, tool, client, principal, body, event)
        event.extra["caller_type"] = body["caller"]["type"]
        if body.get("scope", {}).get("includeWorkingDocs"):
            event.extra["include_working_docs"] = True
        data = await handler(call)
        errors = call.warnings
        if call.partial:
            status_word = "partial"
        elif any(w["severity"] == "error" for w in errors):
            status_word, data = "failed", None
    except (AgentError, ToolError) as err:
        http = err.status if err.status != 200 else 400
        status_word = "denied" if http in (401, 403) else "failed"
        errors = [_error_object(err)]
        event.code = err.code
        data = None
    except Exception:  # a bug: 500 without detail, trace in the log
        log.exception("agent access internal error", extra={"request_id": event.request_id})
        http, status_word, data = 500, "failed", None
        errors = [{"code": "internal", "message": "internal error", "retryable": False, "severity": "error"}]
        event.code = "internal"
    scopes = call.scopes if call is not None else []
    result = {"tool": tool, "status": status_word, "data": data, "errors": errors, "scope": public_scope(scopes),
              "requestId": event.extra.get("caller_request_id", event.request_id), "auditRef": audit_ref}
    event.status = http
    event.outcome = status_word
    event.route = ",".join(r.name for r, _ in scopes)
    if scopes:
        event.scope = {"routes": [e.summary() for _, e in scopes]}
    elif call is not None and isinstance(call.body.get("scope"), dict):
        event.scope = {"requested": _requested_scope(call.body["scope"])}  # what was refused
    event.extra["audit_ref"] = audit_ref
    if errors and event.code is None:
        event.code = errors[0]["code"]
    event.duration_ms = (time.perf_counter() - started) * 1000.0
    audit.write(cfg.audit, event)
    return Response(orjson.dumps(result), status_code=http, headers={**_HEADERS, "x-request-id": event.request_id})


def routes() -> list[Route]:
    """The Starlette route of the tool API."""
    return [Route(PATH, endpoint, methods=["POST"])]


# ------------------------------------------------------------------ request validation


def _invalid(message: str) -> ToolError:
    return ToolError("access.request_invalid", message)


def _strs(v: Any, name: str, *, max_items: int, max_len: int) -> tuple[str, ...]:
    if (not isinstance(v, list) or not 1 <= len(v) <= max_items
            or not all(isinstance(x, str) and 1 <= len(x) <= max_len for x in v)):
        raise _invalid(f"{name} must be 1 to {max_items} strings of 1 to {max_len} characters")
    return tuple(dict.fromkeys(v))


def _globs(v: Any, name: str, *, max_items: int) -> tuple[str, ...]:
    """Path globs of a request: strings (≤ 300 characters) that compile to a path filter."""
    globs = _strs(v, name, max_items=max_items, max_len=300)
    for i, glob in enumerate(globs):
        problem = glob_problem(glob)
        if problem:
            raise _invalid(f"{name}[{i}] {problem}")
    return globs


def _only(d: dict[str, Any], name: str, allowed: set[str]) -> None:
    for k in d:
        if k not in allowed:
            raise _invalid(f"unknown field {name}.{k[:40]}")


def _text(d: dict[str, Any], key: str, *, max_len: int, required: bool = True) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v.strip() or len(v) > max_len:
        raise _invalid(f"input.{key} must be 1 to {max_len} characters")
    return v


def _int(d: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _invalid(f"input.{key} must be an integer from {lo} to {hi}")
    return v


async def _request_body(request: Request, client: AgentClient, tool: str) -> dict[str, Any]:
    """Read and check an AgentToolRequest. Raises ToolError('access.request_invalid') or
    AccessDenied('access.unauthorized') when caller.id names another client."""
    media = json_media_problem(request.headers.get("content-type"), request.headers.get("content-encoding"))
    if media is not None:
        raise _invalid(media[1])
    try:
        raw = await read_limited(request.stream(), MAX_BODY_BYTES,
                                 request.app.state.runtime.config.server.body_timeout_seconds)
    except BodyLimitExceeded as exc:
        raise _invalid(exc.message) from None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _invalid("the body is not JSON") from None
    if not isinstance(body, dict):
        raise _invalid("the body is not a JSON object")
    _only(body, "request", {"caller", "scope", "input", "idempotencyKey", "dedupeKey", "requestId"})
    caller = body.get("caller")
    if not isinstance(caller, dict) or caller.get("type") not in ("agent", "system"):
        raise _invalid("caller.type must be 'agent' or 'system'")
    _only(caller, "caller", {"type", "id"})
    if "id" in caller and caller["id"] != client.id:
        # identity comes from the token; a body claiming another identity is refused
        raise AccessDenied("access.unauthorized", "caller.id does not match the Bearer token")
    if not isinstance(body.get("input"), dict):
        raise _invalid("input must be an object")
    scope = body.get("scope", {})
    if not isinstance(scope, dict):
        raise _invalid("scope must be an object")
    _only(scope, "scope", {"routes", "paths", "datasets", "includeWorkingDocs"})
    for k, n, m in (("routes", 16, 64), ("datasets", 32, 128)):
        if k in scope:
            _strs(scope[k], f"scope.{k}", max_items=n, max_len=m)
    if "paths" in scope:
        _globs(scope["paths"], "scope.paths", max_items=32)
    if not isinstance(scope.get("includeWorkingDocs", False), bool):
        raise _invalid("scope.includeWorkingDocs must be true or false")
    for k in ("idempotencyKey", "dedupeKey"):
        if k in body and (not isinstance(body[k], str) or not _KEY.fullmatch(body[k])):
            raise _invalid(f"{k} must be 8 to 128 of A-Z a-z 0-9 . _ : -")
    if "requestId" in body and (not isinstance(body["requestId"], str) or not _REQUEST_ID.fullmatch(body["requestId"])):
        raise _invalid("requestId must be 1 to 128 of A-Z a-z 0-9 . _ : -")
    if tool in WRITE_TOOLS and "dedupeKey" not in body:
        raise _invalid("dedupeKey is required for write tools (seed 002 §9.5)")
    if (tool in WRITE_TOOLS and body["dedupeKey"].startswith(CANONICAL_PREFIX)
            and body["dedupeKey"] != canonical_dedupe_key(tool, body["input"])):
        # 'sha256:' keys mean "this content" (gateway.idempotency): one that is not this
        # payload's hash would fold this feedback into a record of other content.
        raise _invalid("a dedupeKey starting with 'sha256:' must be this input's canonical hash "
                       "(gateway.idempotency.canonical_dedupe_key); send that, or a key of your own without the prefix")
    return body


# ------------------------------------------------------------------ scope


def resolve(call: Call, *, paths: tuple[str, ...] | None = None,
            datasets: tuple[str, ...] | None = None) -> list[tuple[AgentRoute, EffectiveScope]]:
    """The effective scope of this call per route, through `gateway.scope.resolve_agent`.

    Routes: those named in scope.routes (each must resolve, else the denial is raised),
    else every route of the policy (routes the request cannot use are skipped; none left
    → the last denial). paths/datasets: extra narrowing from the tool input.
    Raises AccessDenied: access.forbidden_tool, access.forbidden_scope, access.dataset_not_allowed.
    """
    scope = call.body.get("scope", {})
    req_paths = tuple(scope["paths"]) if "paths" in scope else None
    req_datasets = tuple(scope["datasets"]) if "datasets" in scope else None
    if paths is not None:
        req_paths = paths if req_paths is None else _narrow(paths, req_paths)
    if datasets is not None:
        if req_datasets is not None and any(d not in req_datasets for d in datasets):
            raise AccessDenied("access.dataset_not_allowed", "a dataset of the input is outside the request scope")
        req_datasets = datasets
    request = ScopeRequest(datasets=req_datasets, path_globs=req_paths,
                           include_working_docs=bool(scope.get("includeWorkingDocs", False)))
    named = tuple(scope["routes"]) if "routes" in scope else None
    out: list[tuple[AgentRoute, EffectiveScope]] = []
    last: AccessDenied | None = None
    policy_tool = "get_page" if call.tool == "get_page" else call.tool
    routes = call.cfg.agent.routes
    for name in named or call.client.policy.routes:
        if named is None and name in routes and not routes[name].enabled:
            continue  # a disabled route the caller did not ask for is not a partial answer
        try:
            out.append(resolve_agent(call.cfg.agent, call.client, call.principal, name, policy_tool, request))
        except AccessDenied as exc:
            if named is not None or exc.code == "access.forbidden_tool":
                raise
            last = exc
    if not out:
        raise last or AccessDenied("access.forbidden_scope", "no route of the policy is open to this request")
    call.scopes = out
    return out


def _narrow(inner: tuple[str, ...], outer: tuple[str, ...]) -> tuple[str, ...]:
    from gateway.scope import intersect_globs

    got = intersect_globs(inner, outer)
    if not got:
        raise AccessDenied("access.forbidden_scope", "the input paths are outside the request scope")
    return got


def path_allowed(eff: EffectiveScope, path: str) -> bool:
    """Could a visible document at `path` be inside `eff` (whatever its dataset)? The
    scope engine's `allows`, asked before any index is touched."""
    open_datasets = dataclasses.replace(eff, filter=dataclasses.replace(eff.filter, datasets=None))
    return allows(open_datasets, path, "", True)


def _index(call: Call, route: AgentRoute, eff: EffectiveScope) -> KnowledgeIndex | None:
    """The route's index, or None with a partial warning (disabled route, index down)."""
    if not route.enabled:
        call.warn("access.tool_failed", f"route {route.name!r} is disabled")
        return None
    try:
        idx: KnowledgeIndex = call.rt.index(eff.index)
        return idx
    except DependencyUnavailable:
        call.warn("access.tool_failed", f"the index of route {route.name!r} is unavailable", retryable=True)
        return None


def _settle_partial(call: Call, served: int) -> None:
    """No route served → the call failed (retryable); some did not → partial."""
    if served == 0:
        raise ToolError("access.tool_failed", "no index of the scope is available", retryable=True)
    if call.warnings:
        call.partial = True


def citation(route: str, doc_id: str, title: str, path: str, dataset: str, revision: str,
             url: str | None = None, chunk: int | None = None) -> dict[str, Any]:
    """A Citation.json dict for an authorized document."""
    c: dict[str, Any] = {"docId": doc_id, "title": title, "path": path, "dataset": dataset, "route": route,
                         "revision": revision}
    if url:
        c["url"] = url
    if chunk is not None:
        c["chunk"] = chunk
    return c


def _hit_citation(route: AgentRoute, h: Hit) -> dict[str, Any]:
    return citation(route.name, h.doc_id, h.title, h.path, h.dataset, h.revision, h.url, h.chunk)


def scoped_search(call: Call, query: str, limit: int, *, content_chars: int = 1) -> list[tuple[AgentRoute, Hit]]:
    """Best hits across the resolved routes, each re-checked with `allows` (qa_visible,
    datasets, paths, the always-excluded trees, working docs); best score first, one per document."""
    found: list[tuple[AgentRoute, Hit]] = []
    served = 0
    for route, eff in call.scopes:
        idx = _index(call, route, eff)
        if idx is None:
            continue
        try:
            hits = idx.search(query, limit, filter=eff.filter, one_per_document=True,
                              summary_chars=SNIPPET_CHARS, content_chars=content_chars)
        except (OSError, ValueError):  # a damaged or vanished index: partial, logged for operators
            log.warning("agent search failed", extra={"route": route.name, "index": eff.index}, exc_info=True)
            call.warn("access.tool_failed", f"the search of route {route.name!r} failed", retryable=True)
            continue
        served += 1
        found += [(route, h) for h in hits if h.score >= route.min_score and allows(eff, h.path, h.dataset, True)]
    _settle_partial(call, served)
    seen: set[tuple[str, str]] = set()
    out: list[tuple[AgentRoute, Hit]] = []
    for route, h in sorted(found, key=lambda rh: -rh[1].score):
        key = (route.index, h.doc_id)
        if key not in seen:
            seen.add(key)
            out.append((route, h))
    return out[:limit]


# ------------------------------------------------------------------ read tools


async def tool_search(call: Call) -> dict[str, Any]:
    """search (seed 002 §9.1): input {query, limit ≤ 50} → {results: SearchResult[]}."""
    _only(call.input, "input", {"query", "limit"})
    query = _text(call.input, "query", max_len=512)
    limit = _int(call.input, "limit", 10, 1, SEARCH_MAX_RESULTS)
    resolve(call)
    assert query is not None
    hits = scoped_search(call, query, limit)
    call.event.extra["results"] = len(hits)
    return {"results": [{"id": f"{r.name}:{h.id}", "title": h.title, "snippet": h.summary,
                         "score": round(h.score, 4), "citation": _hit_citation(r, h)} for r, h in hits]}


async def tool_ask(call: Call) -> dict[str, Any]:
    """ask (seed 002 §9.2): input {question, limit ≤ 10, strict?} → Answer.

    A no-answer is passed with an answer.no_answer info, or failed when strict.
    Raises ToolError('access.tool_failed') when the upstream Answer API fails.
    """
    _only(call.input, "input", {"question", "limit", "strict"})
    question = _text(call.input, "question", max_len=512)
    limit = _int(call.input, "limit", 3, 1, 10)
    strict = call.input.get("strict", False)
    if not isinstance(strict, bool):
        raise _invalid("input.strict must be true or false")
    resolve(call)
    assert question is not None
    passages = [answer.Passage(h.content, h.score, _hit_citation(r, h))
                for r, h in scoped_search(call, question, limit, content_chars=PASSAGE_CHARS)]
    st = state(call.rt, call.cfg)
    if st.answer_client is not None and call.cfg.access.answer_url and passages:
        result = await answer.upstream(st.answer_client, call.cfg.access.answer_url, question, passages, limit)
    else:
        result = answer.extractive(question, passages)
    if result["answer"] is None:
        call.event.extra["no_answer"] = result["noAnswerReason"]
        call.warn("answer.no_answer", f"no answer in scope ({result['noAnswerReason']})",
                  severity="error" if strict else "info")
    return result


def _utf8_cut(text: str, max_bytes: int) -> tuple[str, bool]:
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", errors="ignore"), True


def _find_page(call: Call, *, path: str | None, doc_id: str | None) -> tuple[AgentRoute, StoredDocument]:
    """The authorized document at `path` or with id `doc_id`.

    A path outside every route's scope (including the always-excluded trees and working docs
    not opted into) is access.forbidden_scope before any index is opened; a missing,
    hidden or out-of-scope id is access.page_not_found (no existence oracle)."""
    candidates = call.scopes
    if path is not None:
        candidates = [(r, e) for r, e in call.scopes if path_allowed(e, path)]
        if not candidates:
            raise AccessDenied("access.forbidden_scope", "the path is outside the caller's scope")
    served = 0
    for route, eff in candidates:
        idx = _index(call, route, eff)
        if idx is None:
            continue
        served += 1
        key = idx.doc_id_at(path) if path is not None else doc_id
        doc = idx.get_document(key) if key is not None else None
        if doc is not None and allows(eff, doc.path, doc.dataset, doc.qa_visible):
            return route, doc
    if served == 0:
        raise ToolError("access.tool_failed", "no index of the scope is available", retryable=True)
    raise ToolError("access.page_not_found")


async def tool_get_page(call: Call) -> dict[str, Any]:
    """get_page (seed 002 §9.3): input {path | documentId, fullText?, maxBytes?} → Page.

    Default: front matter, summary and citation. fullText needs the policy tool
    'get_page.full_text' (else access.forbidden_tool) and is cut at maxBytes UTF-8 bytes
    (≤ access.page_max_bytes)."""
    _only(call.input, "input", {"path", "documentId", "fullText", "maxBytes"})
    path = _text(call.input, "path", max_len=300, required=False)
    doc_id = _text(call.input, "documentId", max_len=300, required=False)
    if (path is None) == (doc_id is None):
        raise _invalid("input needs exactly one of path or documentId")
    full = call.input.get("fullText", False)
    if not isinstance(full, bool):
        raise _invalid("input.fullText must be true or false")
    cap = call.cfg.access.page_max_bytes
    max_bytes = _int(call.input, "maxBytes", cap, 1, cap)
    resolve(call)
    if full and "get_page.full_text" not in call.client.policy.tools:
        raise AccessDenied("access.forbidden_tool", "full page text is not allowed for this client")
    route, doc = _find_page(call, path=path, doc_id=doc_id)
    summary, _ = _utf8_cut(doc.summary or doc.text[:SUMMARY_CHARS], max_bytes)
    front: dict[str, Any] = {"path": doc.path, "dataset": doc.dataset, "revision": doc.revision}
    if doc.url:
        front["url"] = doc.url
    if doc.publish_time is not None:
        front["publishTime"] = doc.publish_time
    out: dict[str, Any] = {"docId": doc.doc_id, "title": doc.title, "frontMatter": front, "summary": summary,
                           "citation": citation(route.name, doc.doc_id, doc.title, doc.path, doc.dataset,
                                                doc.revision, doc.url),
                           "truncated": False, "limits": {"maxBytes": max_bytes, "fullText": full}}
    if full:
        out["text"], out["truncated"] = _utf8_cut(doc.text, max_bytes)
    call.event.extra["full_text"] = full
    return out


async def tool_get_context(call: Call) -> dict[str, Any]:
    """get_context (seed 002 §9.4): input {question | paths, limit, strategy} → ContextPack
    with the effective scope and the limits (pages, bytes per page, total bytes)."""
    _only(call.input, "input", {"question", "paths", "limit", "strategy"})
    a = call.cfg.access
    question = _text(call.input, "question", max_len=512, required=False)
    paths = _strs(call.input["paths"], "input.paths", max_items=20, max_len=300) if "paths" in call.input else None
    strategy = call.input.get("strategy", "paths" if paths and question is None else "search")
    if strategy not in ("search", "paths") or (strategy == "search" and question is None) or (
            strategy == "paths" and paths is None):
        raise _invalid("strategy 'search' needs question, 'paths' needs paths")
    max_pages = min(_int(call.input, "limit", a.context_max_pages, 1, 20), a.context_max_pages)
    resolve(call)
    items: list[tuple[AgentRoute, str, str, str, str, str, str | None, str]] = []
    if strategy == "search":
        assert question is not None
        for r, h in scoped_search(call, question, max_pages, content_chars=a.context_max_bytes_per_page):
            items.append((r, h.doc_id, h.title, h.path, h.dataset, h.revision, h.url, h.content))
    else:
        assert paths is not None
        for p in paths[:max_pages]:
            r, d = _find_page(call, path=p, doc_id=None)
            items.append((r, d.doc_id, d.title, d.path, d.dataset, d.revision, d.url, d.text))
        if call.warnings:
            call.partial = True
    pages: list[dict[str, Any]] = []
    total, truncated = 0, len(paths or []) > max_pages
    for r, doc_id, title, path, dataset, rev, url, text in items:
        budget = min(a.context_max_bytes_per_page, a.context_max_total_bytes - total)
        if budget <= 0:
            truncated = True
            break
        excerpt, cut = _utf8_cut(text, budget)
        total += len(excerpt.encode("utf-8"))
        truncated = truncated or cut
        pages.append({"docId": doc_id, "title": title, "excerpt": excerpt, "truncated": cut,
                      "citation": citation(r.name, doc_id, title, path, dataset, rev, url)})
    call.event.extra |= {"pages": len(pages), "context_bytes": total}
    out: dict[str, Any] = {"strategy": strategy, "scope": public_scope(call.scopes),
                           "limits": {"maxPages": max_pages, "maxBytesPerPage": a.context_max_bytes_per_page,
                                      "maxTotalBytes": a.context_max_total_bytes},
                           "pages": pages, "truncated": truncated}
    if question is not None:
        out["question"] = question
    return out


# ------------------------------------------------------------------ write tools


def _citations(v: Any, name: str) -> None:
    if not isinstance(v, list) or len(v) > 10 or not all(
            isinstance(c, dict) and isinstance(c.get("docId"), str) and c["docId"] for c in v):
        raise _invalid(f"{name} must be up to 10 citations with a docId")


async def _write(call: Call, kind_input: dict[str, Any]) -> dict[str, Any]:
    st = state(call.rt, call.cfg)
    if st.bridge is None:
        raise ToolError("access.tool_failed", "write tools need replay.redis_url (idempotency records)",
                        retryable=False)
    body = call.body
    payload_hash = canonical_hash({"tool": call.tool, "scope": body.get("scope"), "input": kind_input,
                                   "dedupeKey": body["dedupeKey"]})
    done = await st.bridge.submit(tool=call.tool, caller_id=call.client.id,
                                  idempotency_key=body.get("idempotencyKey"), dedupe_key=body["dedupeKey"],
                                  payload_hash=payload_hash, payload=kind_input)
    call.event.extra |= {"record": done.data["recordId"], "deduped": done.deduped, "replayed": done.replayed,
                         "idempotency_key": "idempotencyKey" in body}
    if done.deduped:
        call.warn("access.feedback_deduped", f"a record with this dedupeKey exists; its count is now "
                  f"{done.data['count']} and this input was not filed separately", severity="info")
    return done.data


async def tool_create_feedback(call: Call) -> dict[str, Any]:
    """create_feedback (seed 002 §9.5): FeedbackRequest → WriteResult (deduped info on repeats)."""
    i = call.input
    _only(i, "input", {"kind", "message", "question", "citations"})
    if i.get("kind") not in ("no_answer", "wrong_answer", "outdated", "missing_content", "other"):
        raise _invalid("input.kind must be no_answer, wrong_answer, outdated, missing_content or other")
    _text(i, "message", max_len=2000)
    _text(i, "question", max_len=500, required=False)
    if "citations" in i:
        _citations(i["citations"], "input.citations")
    resolve(call)
    return await _write(call, i)


async def tool_create_improvement_task(call: Call) -> dict[str, Any]:
    """create_improvement_task (seed 002 §9.6): ImprovementTaskRequest → WriteResult.
    The task's scope must lie inside the caller's (resolved like a read)."""
    i = call.input
    _only(i, "input", {"goal", "scope", "evidence", "priority"})
    _text(i, "goal", max_len=500)
    scope = i.get("scope")
    if not isinstance(scope, dict) or not scope:
        raise _invalid("input.scope must name paths and/or datasets")
    _only(scope, "input.scope", {"paths", "datasets"})
    paths = _globs(scope["paths"], "input.scope.paths", max_items=20) if "paths" in scope else None
    datasets = (_strs(scope["datasets"], "input.scope.datasets", max_items=20, max_len=128)
                if "datasets" in scope else None)
    ev = i.get("evidence", [])
    if not isinstance(ev, list) or len(ev) > 20 or not all(isinstance(e, dict) and e for e in ev):
        raise _invalid("input.evidence must be up to 20 non-empty objects")
    for e in ev:
        _only(e, "input.evidence[]", {"question", "note", "citation"})
        if "citation" in e:
            _citations([e["citation"]], "input.evidence[].citation")
    if i.get("priority", "normal") not in ("low", "normal", "high"):
        raise _invalid("input.priority must be low, normal or high")
    scopes = resolve(call, paths=paths, datasets=datasets)
    # The task records the scope the caller was granted, never the raw request (seed 002 §8:
    # a request only narrows the policy; AgentBridge acts on what is recorded).
    granted = {
        "paths": sorted({g for _, e in scopes for g in (e.filter.path_globs or ("**",))}),
        "datasets": sorted({d for _, e in scopes for d in (e.filter.datasets or ("*",))}),
        "excluded": sorted({g for _, e in scopes for g in e.filter.exclude_path_globs}),
    }
    return await _write(call, {**i, "scope": granted})


TOOLS = {
    "search": tool_search,
    "ask": tool_ask,
    "get_page": tool_get_page,
    "get_context": tool_get_context,
    "create_feedback": tool_create_feedback,
    "create_improvement_task": tool_create_improvement_task,
}
